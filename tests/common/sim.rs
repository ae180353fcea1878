//! The `fhirsmith-sim` tests' harness: the real binary alone (no launcher) on a free loopback
//! port, with or without an IPC channel whose launcher end the test holds, and an async
//! one-request client.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use fhircluster::ipc::channel::{self, LauncherChannel, Received};
use fhircluster::ipc::message::FromChild;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use super::{free_port, read_response, Response, SIM};

pub type R<T> = Result<T, String>;

pub struct Sim {
    pub child: Child,
    pub port: u16,
    pub channel: Option<LauncherChannel>,
}

pub struct Start<'a> {
    pub role: Option<&'a str>,
    pub code: Option<&'a str>,
    pub port: u16,
    pub data_dir: &'a Path,
    pub env: Vec<(&'a str, String)>,
    pub channel: bool,
}

impl<'a> Start<'a> {
    pub fn new(role: &'a str, code: &'a str, data_dir: &'a Path) -> R<Start<'a>> {
        Ok(Start {
            role: Some(role),
            code: Some(code),
            port: free_port(),
            data_dir,
            env: Vec::new(),
            channel: false,
        })
    }

    pub fn env(mut self, k: &'a str, v: impl Into<String>) -> Start<'a> {
        self.env.push((k, v.into()));
        self
    }

    pub fn channel(mut self) -> Start<'a> {
        self.channel = true;
        self
    }

    pub fn port(mut self, port: u16) -> Start<'a> {
        self.port = port;
        self
    }

    /// Spawns without waiting for anything.
    pub fn spawn(self) -> R<Sim> {
        let mut cmd = Command::new(SIM);
        if let Some(r) = self.role {
            cmd.arg(format!("--role={r}"))
                .arg(format!("--port={}", self.port));
        } else {
            cmd.env("PORT", self.port.to_string());
        }
        if let Some(c) = self.code {
            cmd.arg(format!("--instance-code={c}"));
        }
        cmd.env("FHIRSMITH_DATA_DIR", self.data_dir)
            .env_remove("NODE_CHANNEL_FD")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let mut launcher_end = None;
        if self.channel {
            let (l, c) = channel::socketpair().map_err(|e| e.to_string())?;
            channel::prepare_child(cmd.as_std_mut(), c);
            launcher_end = Some(l);
        }
        let child = cmd.spawn().map_err(|e| e.to_string())?;
        drop(cmd);
        let channel = match launcher_end {
            Some(fd) => Some(channel::launcher(fd).map_err(|e| e.to_string())?),
            None => None,
        };
        Ok(Sim {
            child,
            port: self.port,
            channel,
        })
    }

    /// Spawns and waits until it is ready (its `ready` message, or its port answering).
    pub async fn start(self) -> R<Sim> {
        let with_channel = self.channel;
        let mut sim = self.spawn()?;
        if with_channel {
            loop {
                match sim.recv().await? {
                    FromChild::Ready { .. } => break,
                    // Protocol 1.1: hello first.
                    FromChild::Hello { .. } => {}
                    other => return Err(format!("expected ready, got {other:?}")),
                }
            }
        } else {
            sim.wait_listening().await?;
        }
        Ok(sim)
    }
}

impl Sim {
    pub async fn wait_listening(&self) -> R<()> {
        for _ in 0..200 {
            if TcpStream::connect(("127.0.0.1", self.port)).await.is_ok() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        Err(format!("nothing listening on {} after 5 s", self.port))
    }

    /// The next known message from the child (unknown types and errors skipped), within 10 s.
    pub async fn recv(&mut self) -> R<FromChild> {
        let ch = self.channel.as_mut().ok_or("no channel")?;
        loop {
            let got = tokio::time::timeout(Duration::from_secs(10), ch.recv())
                .await
                .map_err(|_| "no IPC message within 10 s".to_string())?;
            match got {
                Received::Message(m) => return Ok(m),
                Received::Closed => return Err("channel closed".into()),
                _ => {}
            }
        }
    }

    pub fn sigterm(&self) -> R<()> {
        let pid = self.child.id().ok_or("child gone")?;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .map_err(|e| e.to_string())
    }

    pub async fn wait_exit(&mut self, within: Duration) -> R<std::process::ExitStatus> {
        tokio::time::timeout(within, self.child.wait())
            .await
            .map_err(|_| format!("still running after {within:?}"))?
            .map_err(|e| e.to_string())
    }

    pub async fn get(&self, path: &str) -> R<Response> {
        http(self.port, "GET", path, &[], b"").await
    }

    pub async fn post(&self, path: &str, headers: &[(&str, &str)], body: &[u8]) -> R<Response> {
        http(self.port, "POST", path, headers, body).await
    }
}

/// One request on its own connection (`Connection: close`), within 10 s.
pub async fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> R<Response> {
    let fut = async {
        let mut s = TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| e.to_string())?;
        let mut req =
            format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("transfer-encoding"))
        {
            req.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        s.write_all(body).await.map_err(|e| e.to_string())?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await.map_err(|e| e.to_string())?;
        read_response(&mut &raw[..]).ok_or_else(|| "no whole response".to_string())
    };
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .map_err(|_| format!("{method} {path}: no answer within 10 s"))?
}
