//! A connected socket handed from a helper process to Satchel over a Unix
//! socket pair (`SCM_RIGHTS`): how [`super::LoopbackNet::connect`] gets a
//! connection made inside a network namespace it is not in.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixDatagram;

/// Room for one descriptor's control message, aligned for `cmsghdr`.
#[repr(C, align(8))]
struct Control([u8; 64]);

/// In the helper, between fork and exec: connects to `port` on loopback
/// and sends the socket over `channel`. Only system calls on stack memory.
pub(crate) fn connect_and_send(channel: libc::c_int, port: u16) -> io::Result<()> {
    // SAFETY: system calls on stack structures that outlive them; the
    // control buffer is large enough and aligned for one descriptor.
    unsafe {
        let socket = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if socket < 0 {
            return Err(io::Error::last_os_error());
        }
        let address = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
            },
            sin_zero: [0; 8],
        };
        let connected = libc::connect(
            socket,
            std::ptr::from_ref(&address).cast(),
            size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        if connected != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut byte = [0u8; 1];
        let mut iov = one_byte(&mut byte);
        let mut control = Control([0; 64]);
        let mut message = message(&mut iov, &mut control);
        message.msg_controllen = libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) as _;
        let header = libc::CMSG_FIRSTHDR(&raw const message);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(header).cast::<libc::c_int>(), socket);
        if libc::sendmsg(channel, &raw const message, 0) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// In Satchel: the descriptor the helper sent, close-on-exec.
pub(crate) fn receive(channel: &UnixDatagram) -> io::Result<OwnedFd> {
    channel.set_nonblocking(true)?;
    // SAFETY: recvmsg into stack structures; the descriptor read from the
    // control message is new to this process and owned from here on.
    unsafe {
        let mut byte = [0u8; 1];
        let mut iov = one_byte(&mut byte);
        let mut control = Control([0; 64]);
        let mut message = message(&mut iov, &mut control);
        if libc::recvmsg(
            channel.as_raw_fd(),
            &raw mut message,
            libc::MSG_CMSG_CLOEXEC,
        ) < 0
        {
            return Err(io::Error::last_os_error());
        }
        let header = libc::CMSG_FIRSTHDR(&raw const message);
        if header.is_null()
            || (*header).cmsg_level != libc::SOL_SOCKET
            || (*header).cmsg_type != libc::SCM_RIGHTS
        {
            return Err(io::Error::other("the helper sent no socket"));
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(header).cast::<libc::c_int>());
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// The one byte of payload a message carries beside its descriptor.
fn one_byte(byte: &mut [u8; 1]) -> libc::iovec {
    libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    }
}

/// A message of `iov` with `control` as its whole control buffer; the
/// pointers are to the caller's storage, which must outlive the message.
fn message(iov: &mut libc::iovec, control: &mut Control) -> libc::msghdr {
    // SAFETY: `msghdr` is plain data; all-zero is its empty value.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = std::ptr::from_mut(iov);
    message.msg_iovlen = 1;
    message.msg_control = control.0.as_mut_ptr().cast();
    message.msg_controllen = control.0.len() as _;
    message
}
