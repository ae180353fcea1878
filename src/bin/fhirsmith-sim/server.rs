//! The sim's HTTP/1.1 listener: accept, serve each connection on the one request thread, and on
//! stop, accept no more and let each connection finish the request it has (idle keep-alive
//! connections close at once), as a Node server's `close()` does (SIM-19).

use std::sync::Arc;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::handler;
use super::state::Sim;

/// Serves until `stop` turns true, then waits for the connections to finish. The listener is
/// borrowed, so the caller decides how long the port stays held (`SIM_LINGER_MS`).
pub async fn serve(listener: &TcpListener, sim: Arc<Sim>, stop: watch::Receiver<bool>) {
    let mut conns = JoinSet::new();
    let mut stop_accepting = stop.clone();
    loop {
        tokio::select! {
            _ = stopped(&mut stop_accepting) => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let sim = sim.clone();
                    let mut stop = stop.clone();
                    conns.spawn(async move {
                        let svc = service_fn(move |req| handler::handle(sim.clone(), req));
                        let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), svc);
                        tokio::pin!(conn);
                        tokio::select! {
                            _ = conn.as_mut() => {}
                            _ = stopped(&mut stop) => {
                                conn.as_mut().graceful_shutdown();
                                let _ = conn.await;
                            }
                        }
                    });
                }
                // Out of fds and the like: pause rather than spin.
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    while conns.join_next().await.is_some() {}
}

/// Resolves once stop is true (or its sender is gone), holding no borrow of the value.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}
