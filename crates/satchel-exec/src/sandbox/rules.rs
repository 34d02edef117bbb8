//! The Landlock ruleset of a sandboxed command: read everywhere, write only
//! beneath the writable paths, no TCP unless allowed, and (from ABI 6) no
//! signals or abstract unix sockets across the sandbox's edge.

use std::path::PathBuf;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, Scope, path_beneath_rules,
};

/// File rights handled: ABI 5 (Linux 6.10) adds device ioctls to ABI 3's
/// truncation; older kernels enforce what they know.
const FS_ABI: ABI = ABI::V5;
/// TCP bind and connect: ABI 4 (Linux 6.7).
const NET_ABI: ABI = ABI::V4;
/// Signal and abstract-socket scoping: ABI 6 (Linux 6.12).
const SCOPE_ABI: ABI = ABI::V6;

/// Builds the ruleset in the parent, for a kernel of Landlock ABI `abi`
/// (at least 1: the caller refuses to sandbox without Landlock).
pub(crate) fn ruleset(
    writable: &[PathBuf],
    network: bool,
    abi: i32,
) -> Result<RulesetCreated, landlock::RulesetError> {
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(FS_ABI))?;
    if !network && abi >= NET_ABI as i32 {
        ruleset = ruleset.handle_access(AccessNet::from_all(NET_ABI))?;
    }
    if abi >= SCOPE_ABI as i32 {
        ruleset = ruleset.scope(Scope::from_all(SCOPE_ABI))?;
    }
    let dev_null = PathBuf::from("/dev/null");
    let writable = writable.iter().chain(std::iter::once(&dev_null));
    ruleset
        .create()?
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(FS_ABI)))?
        .add_rules(path_beneath_rules(writable, AccessFs::from_all(FS_ABI)))
}
