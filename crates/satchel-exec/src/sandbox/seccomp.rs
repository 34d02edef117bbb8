//! The seccomp filter of a sandboxed command: the sockets Landlock cannot
//! see (UDP, raw, unix and abstract unix, netlink) and io_uring, which
//! would open them behind the filter's back.
//!
//! Without network, no socket can be created at all; `socketpair` still
//! makes connected unix stream pairs, which many runtimes use to talk to
//! their own children. With network, only IPv4, IPv6 and netlink (which
//! the resolver reads interfaces through) are allowed. A refused call
//! fails with `EACCES`, the error a firewall gives, so programs report a
//! refused connection rather than crash.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Builds the filter in the parent; the child only loads it.
pub(crate) fn filter(network: bool) -> Result<BpfProgram, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|_| {
        format!(
            "seccomp filters are not built for {}",
            std::env::consts::ARCH
        )
    })?;
    build(network, arch).map_err(|error| format!("cannot build the seccomp filter: {error}"))
}

fn build(network: bool, arch: TargetArch) -> Result<BpfProgram, seccompiler::BackendError> {
    let domain = |op, value: i32| {
        SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            op,
            u64::from(value.unsigned_abs()),
        )
    };
    let always = Vec::new();
    let socket = if network {
        // Refused unless the family is one of the allowed ones.
        vec![SeccompRule::new(vec![
            domain(SeccompCmpOp::Ne, libc::AF_INET)?,
            domain(SeccompCmpOp::Ne, libc::AF_INET6)?,
            domain(SeccompCmpOp::Ne, libc::AF_NETLINK)?,
        ])?]
    } else {
        always.clone()
    };
    // A datagram pair can be aimed at any named socket with `sendto`, so
    // pairs are unix streams (or seqpackets) only: every other type is
    // refused (the kernel makes SOCK_RAW and SOCK_RDM unix pairs datagrams).
    let socket_type = |kind: i32| {
        SeccompCondition::new(
            1,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(0xf),
            u64::from(kind.unsigned_abs()),
        )
        .and_then(|condition| SeccompRule::new(vec![condition]))
    };
    let mut socketpair = vec![SeccompRule::new(vec![domain(
        SeccompCmpOp::Ne,
        libc::AF_UNIX,
    )?])?];
    for kind in [libc::SOCK_DGRAM, libc::SOCK_RAW, libc::SOCK_RDM] {
        socketpair.push(socket_type(kind)?);
    }
    let rules: BTreeMap<i64, Vec<SeccompRule>> = [
        (libc::SYS_socket, socket),
        (libc::SYS_socketpair, socketpair),
        (libc::SYS_io_uring_setup, always.clone()),
        (libc::SYS_io_uring_enter, always.clone()),
        (libc::SYS_io_uring_register, always),
    ]
    .into_iter()
    .collect();
    let refuse = SeccompAction::Errno(libc::EACCES.unsigned_abs());
    SeccompFilter::new(rules, SeccompAction::Allow, refuse, arch)?.try_into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_filters_build() {
        assert!(!filter(false).unwrap().is_empty());
        assert!(!filter(true).unwrap().is_empty());
    }
}
