//! Ports of an owner's loopback-only namespace reached from the machine's
//! own loopback, where the user allows it (`exec.forwardPorts`): the dev
//! server a model started in the background, opened in the user's
//! browser. A listener on `127.0.0.1:PORT` outside; each connection
//! joined to the same port inside ([`LoopbackNet::connect`]) and copied
//! both ways until either side closes. Nothing else crosses: only the
//! ports listed, only from the machine's loopback, only inward.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::sandbox::LoopbackNet;

/// What became of one port asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Forwarded {
    /// `127.0.0.1:PORT` on the machine now reaches the port inside.
    Listening(u16),
    /// Another owner's namespace has this port.
    TakenByOther(u16),
    /// The machine's port could not be listened on (in use...).
    Failed(u16, String),
}

impl Forwarded {
    /// One sentence for the model.
    pub fn describe(&self) -> String {
        match self {
            Forwarded::Listening(port) => format!(
                "Port {port} here is forwarded to http://127.0.0.1:{port} on the user's machine (exec.forwardPorts)."
            ),
            Forwarded::TakenByOther(port) => {
                format!("Port {port} is forwarded for another conversation, not this one.")
            }
            Forwarded::Failed(port, reason) => {
                format!("Port {port} could not be forwarded to the user's machine: {reason}.")
            }
        }
    }
}

/// The forwarded ports of every owner.
#[derive(Default)]
pub(crate) struct Forwards {
    by_port: HashMap<u16, (String, CancellationToken)>,
}

impl Forwards {
    /// Forwards those of `ports` not forwarded yet into `net` of `owner`;
    /// reports only what changed (a port already forwarded for `owner`
    /// is not told again).
    pub(crate) fn open(
        &mut self,
        owner: &str,
        net: &Arc<LoopbackNet>,
        ports: &[u16],
    ) -> Vec<Forwarded> {
        let mut told = Vec::new();
        for &port in ports {
            match self.by_port.get(&port) {
                Some((holder, _)) if holder == owner => continue,
                Some(_) => {
                    told.push(Forwarded::TakenByOther(port));
                    continue;
                }
                None => {}
            }
            match listen(port) {
                Ok(listener) => {
                    let stop = CancellationToken::new();
                    tokio::spawn(serve(listener, net.clone(), port, stop.clone()));
                    self.by_port.insert(port, (owner.to_owned(), stop));
                    told.push(Forwarded::Listening(port));
                }
                Err(error) => told.push(Forwarded::Failed(port, error.to_string())),
            }
        }
        told
    }

    /// Closes `owner`'s forwards (its namespace is gone).
    pub(crate) fn close_owner(&mut self, owner: &str) {
        self.by_port.retain(|_, (holder, stop)| {
            let mine = holder == owner;
            if mine {
                stop.cancel();
            }
            !mine
        });
    }

    /// Closes every forward.
    pub(crate) fn close_all(&mut self) {
        for (_, (_, stop)) in self.by_port.drain() {
            stop.cancel();
        }
    }
}

/// The machine's `127.0.0.1:port`, listened on.
fn listen(port: u16) -> std::io::Result<TcpListener> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", port))?;
    listener.set_nonblocking(true)?;
    TcpListener::from_std(listener)
}

/// Accepts until `stop`; each connection goes on its own until either
/// side closes or `stop` fires.
async fn serve(listener: TcpListener, net: Arc<LoopbackNet>, port: u16, stop: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let mut outside = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::warn!(port, %error, "a forwarded port failed to accept");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let net = net.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let inside = tokio::task::spawn_blocking(move || net.connect(port)).await;
            let mut inside = match inside {
                Ok(Ok(stream)) => match stream
                    .set_nonblocking(true)
                    .and_then(|()| TcpStream::from_std(stream))
                {
                    Ok(stream) => stream,
                    Err(error) => {
                        tracing::debug!(port, %error, "cannot use the forwarded connection");
                        return;
                    }
                },
                // Nothing listens inside (yet): the outside connection
                // closes, as a refused one would.
                Ok(Err(error)) => {
                    tracing::debug!(port, %error, "nothing to forward to");
                    return;
                }
                Err(_) => return,
            };
            tokio::select! {
                () = stop.cancelled() => {}
                _ = tokio::io::copy_bidirectional(&mut outside, &mut inside) => {}
            }
        });
    }
}
