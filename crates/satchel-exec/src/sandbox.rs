//! An optional Landlock sandbox for a child: it may read everywhere but
//! write only where it is told to, and (unless allowed) make no TCP
//! connections.
//!
//! The ruleset is built in the parent, where allocation is safe; the child
//! only calls `prctl(PR_SET_NO_NEW_PRIVS)` and `landlock_restrict_self`
//! between fork and exec.

use std::path::PathBuf;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, path_beneath_rules,
};

/// What a sandboxed child may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSpec {
    /// Directories (and files) it may write; everything else is read-only.
    pub writable: Vec<PathBuf>,
    /// Whether it may open TCP connections and listen on ports.
    pub network: bool,
}

/// What was enforced, told truthfully to the caller (and the model).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SandboxReport {
    /// No sandbox was asked for.
    #[default]
    NotRequested,
    /// Landlock restricts writes to the writable paths, and TCP when
    /// `network_blocked`.
    Enforced {
        /// TCP bind and connect are refused.
        network_blocked: bool,
    },
    /// A sandbox was asked for but this kernel cannot enforce it; the
    /// child ran without one.
    Unavailable {
        /// Why.
        reason: String,
    },
}

/// Landlock rights for files: ABI 3 (Linux 6.2) covers truncation; the
/// network rules need ABI 4 (Linux 6.7).
const FS_ABI: ABI = ABI::V3;
const NET_ABI: ABI = ABI::V4;

/// Builds the ruleset in the parent. `Err` explains why the kernel
/// cannot enforce it (the caller runs the child unsandboxed and says so).
pub(crate) fn prepare(spec: &SandboxSpec) -> Result<(RulesetCreated, SandboxReport), String> {
    let build = |restrict_network: bool| -> Result<RulesetCreated, landlock::RulesetError> {
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(FS_ABI))?;
        if restrict_network {
            ruleset = ruleset.handle_access(AccessNet::from_all(NET_ABI))?;
        }
        let dev_null = PathBuf::from("/dev/null");
        let writable = spec.writable.iter().chain(std::iter::once(&dev_null));
        ruleset
            .create()?
            .add_rules(path_beneath_rules(["/"], AccessFs::from_read(FS_ABI)))?
            .add_rules(path_beneath_rules(writable, AccessFs::from_all(FS_ABI)))
    };
    let restrict_network = !spec.network;
    match build(restrict_network) {
        Ok(ruleset) => Ok((
            ruleset,
            SandboxReport::Enforced {
                network_blocked: restrict_network,
            },
        )),
        Err(error) if restrict_network => {
            // An older kernel may handle files but not the network.
            let files_only = build(false).map_err(|e| format!("Landlock is not available: {e}"))?;
            tracing::debug!(%error, "Landlock cannot restrict the network here");
            Ok((
                files_only,
                SandboxReport::Enforced {
                    network_blocked: false,
                },
            ))
        }
        Err(error) => Err(format!("Landlock is not available: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_prepares_or_explains() {
        let spec = SandboxSpec {
            writable: vec![std::env::temp_dir()],
            network: false,
        };
        match prepare(&spec) {
            Ok((_, report)) => assert!(matches!(report, SandboxReport::Enforced { .. })),
            Err(reason) => assert!(reason.starts_with("Landlock is not available"), "{reason}"),
        }
    }
}
