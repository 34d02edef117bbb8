//! [`serve_stdio`]: a server over this process's stdin and stdout, the
//! transport MCP clients use when they start the server themselves.

use std::os::fd::AsFd;

use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ServerHandler, ServiceExt};
use tokio::net::unix::pipe;
use tokio_util::sync::CancellationToken;

use super::WatchRoots;
use crate::McpError;

/// Serves `server` over this process's stdin and stdout until the client
/// disconnects or `shutdown` fires.
///
/// When stdin and stdout are pipes (as MCP clients start servers), they
/// are read and written through the event loop; otherwise through Tokio's
/// blocking stdio, which hands every read to a helper thread.
///
/// # Caveats
/// Stdout carries the protocol only: nothing else in the process may print
/// to it while this runs (log to stderr). Pipes are switched to
/// non-blocking mode. Calls still running when the client goes away are
/// cancelled with their futures, which stops their process groups.
pub async fn serve_stdio<S: ServerHandler>(
    server: S,
    shutdown: CancellationToken,
) -> Result<(), McpError> {
    let running = match stdio_pipes() {
        Some((read, write)) => {
            let transport = AsyncRwTransport::new_server(read, write);
            server
                .serve_with_ct(WatchRoots::new(transport), shutdown)
                .await
        }
        None => {
            let transport = AsyncRwTransport::new_server(tokio::io::stdin(), tokio::io::stdout());
            server
                .serve_with_ct(WatchRoots::new(transport), shutdown)
                .await
        }
    }
    .map_err(|error| McpError::Serve(error.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|error| McpError::Serve(error.to_string()))?;
    Ok(())
}

/// Stdin and stdout as event-loop pipes, when both are pipes (checked
/// first, so a fallback never meets a descriptor made non-blocking).
fn stdio_pipes() -> Option<(pipe::Receiver, pipe::Sender)> {
    let is_pipe = |fd: std::os::fd::BorrowedFd<'_>| {
        rustix::fs::fstat(fd).is_ok_and(|stat| {
            rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::Fifo
        })
    };
    let (stdin, stdout) = (std::io::stdin(), std::io::stdout());
    if !(is_pipe(stdin.as_fd()) && is_pipe(stdout.as_fd())) {
        return None;
    }
    let stdin = stdin.as_fd().try_clone_to_owned().ok()?;
    let stdout = stdout.as_fd().try_clone_to_owned().ok()?;
    let receiver = pipe::Receiver::from_owned_fd(stdin).ok()?;
    let sender = pipe::Sender::from_owned_fd(stdout).ok()?;
    Some((receiver, sender))
}
