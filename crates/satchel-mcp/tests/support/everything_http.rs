//! The reference server, `server-everything`, over streamable HTTP on a
//! port of the caller's choosing, in its own process group: shared by the
//! client tests and the reconnect bench.

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The `mcp-server-everything` binary `scripts/install-test-peers.sh`
/// installs (the benches' reference server); panics when it is missing.
pub fn reference_server() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../.peers/node_modules/.bin/mcp-server-everything");
    assert!(
        path.exists(),
        "{} is missing: run scripts/install-test-peers.sh",
        path.display()
    );
    path
}

/// `server` (the `mcp-server-everything` binary) serving on `port`.
pub fn start(server: &Path, port: u16) -> Child {
    use std::os::unix::process::CommandExt;
    Command::new(server)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap()
}

/// Stops a server started by [`start`], its whole process group.
pub fn kill(mut child: Child) {
    let group = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    let _ = child.wait();
}

/// A port free now, for a server that cannot pick its own.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
