//! The launcher's signal handlers, installed together before any process is started, as one
//! stream of `Sig` values (what each means is `signals.rs`). Installing a handler replaces the
//! signal's default action for the rest of the launcher's life, so a signal that arrives while
//! nothing reads the stream waits in it instead of ending the launcher.

use anyhow::{Context, Result};
use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::signals::Sig;

pub struct Signals {
    streams: Vec<(Sig, Signal)>,
}

impl Signals {
    /// Installs a handler for every signal in `Sig::ALL`. Call on the runtime, first thing.
    pub fn install() -> Result<Signals> {
        let streams = Sig::ALL
            .iter()
            .map(|&s| {
                let stream = signal(SignalKind::from_raw(s.number()))
                    .with_context(|| format!("installing the {s} handler"))?;
                Ok((s, stream))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Signals { streams })
    }

    /// A signal received and not yet taken, without waiting.
    /// Gives the runtime's driver a turn, so a signal already delivered to the process (its
    /// handler has run) is seen by [`pending`](Self::pending): the driver reads the handler's
    /// wake-up only when it is polled, and a look with a no-op waker does not poll it (a
    /// runtime thread busy or blocked until now would otherwise hide it).
    pub async fn settle(&mut self) {
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }

    pub fn pending(&mut self) -> Option<Sig> {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        self.streams.iter_mut().find_map(|(sig, stream)| {
            matches!(stream.poll_recv(&mut cx), std::task::Poll::Ready(Some(()))).then_some(*sig)
        })
    }

    /// The next signal received. Cancel-safe: a signal is never lost by dropping this future.
    pub async fn next(&mut self) -> Sig {
        std::future::poll_fn(|cx| {
            for (sig, stream) in &mut self.streams {
                // `None` only once the runtime's driver is gone; then nothing arrives anyway.
                if let std::task::Poll::Ready(Some(())) = stream.poll_recv(cx) {
                    return std::task::Poll::Ready(*sig);
                }
            }
            std::task::Poll::Pending
        })
        .await
    }
}
