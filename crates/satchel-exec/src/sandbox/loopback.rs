//! [`LoopbackNet`]: a network namespace with only a loopback interface,
//! shared by the sandboxed commands that join it: a server one of them
//! starts on 127.0.0.1 is reachable by the others, and no address outside
//! is (there is no other interface and no route).
//!
//! Made by a short-lived helper that enters a new user and network
//! namespace, brings `lo` up and execs `sleep`; Satchel keeps the two
//! namespaces open by descriptor and ends the helper. A command joins them
//! between fork and exec (`setns`), before its own namespaces.

use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// A user and a network namespace held open; see the module docs.
pub struct LoopbackNet {
    pub(crate) user: OwnedFd,
    pub(crate) net: OwnedFd,
}

impl fmt::Debug for LoopbackNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoopbackNet")
            .field("user", &self.user.as_raw_fd())
            .field("net", &self.net.as_raw_fd())
            .finish()
    }
}

impl LoopbackNet {
    /// Makes a new namespace pair; `Err` says why this system cannot.
    pub fn new() -> Result<LoopbackNet, String> {
        crate::make_children_reapable();
        let uid_map = format!("{0} {0} 1\n", rustix::process::getuid().as_raw()).into_bytes();
        let gid_map = format!("{0} {0} 1\n", rustix::process::getgid().as_raw()).into_bytes();
        #[expect(
            clippy::disallowed_methods,
            reason = "the sandbox's own helper, which only holds namespaces"
        )]
        let mut command = Command::new("sleep");
        command
            .arg("60")
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: only async-signal-safe system calls on memory prepared
        // above.
        unsafe {
            command.pre_exec(move || enter(&uid_map, &gid_map));
        }
        let mut helper = command
            .spawn()
            .map_err(|error| format!("cannot make a loopback-only network namespace: {error}"))?;
        let open = |name: &str| -> io::Result<OwnedFd> {
            File::open(format!("/proc/{}/ns/{name}", helper.id())).map(OwnedFd::from)
        };
        let held = open("user").and_then(|user| Ok((user, open("net")?)));
        let _ = helper.kill();
        let _ = helper.wait();
        let (user, net) =
            held.map_err(|error| format!("cannot hold the network namespace: {error}"))?;
        Ok(LoopbackNet { user, net })
    }

    /// A TCP connection to `port` on this namespace's own loopback, made
    /// from outside it (to forward a port of the machine to a server
    /// inside): a short-lived helper joins the namespaces, connects, and
    /// hands the socket back over a socket pair (`SCM_RIGHTS`). A refused
    /// connection is the helper's error.
    pub fn connect(&self, port: u16) -> io::Result<std::net::TcpStream> {
        let (ours, theirs) = std::os::unix::net::UnixDatagram::pair()?;
        let (user, net) = (self.user.as_raw_fd(), self.net.as_raw_fd());
        let channel = theirs.as_raw_fd();
        #[expect(
            clippy::disallowed_methods,
            reason = "the sandbox's own helper, which only connects a socket"
        )]
        let mut command = Command::new("true");
        command
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: only async-signal-safe system calls on memory prepared
        // above.
        unsafe {
            command.pre_exec(move || {
                join(user, net)?;
                super::handover::connect_and_send(channel, port)
            });
        }
        let mut helper = command.spawn()?;
        drop(theirs);
        let _ = helper.wait();
        super::handover::receive(&ours).map(std::net::TcpStream::from)
    }
}

/// In the helper: new user and network namespaces, our own ids mapped,
/// `lo` up.
fn enter(uid_map: &[u8], gid_map: &[u8]) -> io::Result<()> {
    // SAFETY: system calls on buffers that outlive them.
    unsafe {
        if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    let _ = super::syscalls::write_file(c"/proc/self/setgroups", b"deny");
    super::syscalls::write_file(c"/proc/self/uid_map", uid_map)?;
    super::syscalls::write_file(c"/proc/self/gid_map", gid_map)?;
    loopback_up()
}

/// `ip link set lo up`, as two ioctls on a datagram socket (between fork
/// and exec: async-signal-safe calls only).
pub(super) fn loopback_up() -> io::Result<()> {
    // SAFETY: socket, ioctl and close on a stack struct.
    unsafe {
        let socket = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if socket < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut request: libc::ifreq = std::mem::zeroed();
        for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
            *slot = *byte as libc::c_char;
        }
        let mut result = libc::ioctl(socket, libc::SIOCGIFFLAGS, &mut request);
        if result == 0 {
            request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            result = libc::ioctl(socket, libc::SIOCSIFFLAGS, &request);
        }
        let error = io::Error::last_os_error();
        libc::close(socket);
        if result == 0 { Ok(()) } else { Err(error) }
    }
}

/// Joins `net`'s namespaces: called between fork and exec, before the
/// command's own namespaces.
pub(crate) fn join(user: libc::c_int, net: libc::c_int) -> io::Result<()> {
    // SAFETY: setns on descriptors the parent holds open.
    unsafe {
        if libc::setns(user, libc::CLONE_NEWUSER) != 0 || libc::setns(net, libc::CLONE_NEWNET) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
