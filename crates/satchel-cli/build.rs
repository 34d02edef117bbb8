//! Build information for `satchel --version`: the commit (from git, or
//! `SATCHEL_COMMIT` where there is no repository, e.g. a source tarball)
//! and the build date (`SOURCE_DATE_EPOCH` when set, for reproducible
//! builds; else the time of the build).

#![allow(
    clippy::disallowed_methods,
    reason = "a build script talks to cargo through the environment and runs tools"
)]

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    println!("cargo:rerun-if-env-changed=SATCHEL_COMMIT");
    let commit = std::env::var("SATCHEL_COMMIT")
        .ok()
        .filter(|commit| !commit.trim().is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=SATCHEL_COMMIT={}", commit.trim());
    let epoch = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|value| value.trim().parse::<i64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |elapsed| {
                    i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX)
                })
        });
    println!("cargo:rustc-env=SATCHEL_BUILD_DATE={}", date(epoch));
}

/// Runs `git ARGS` in this crate's directory; its trimmed output.
fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    (output.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}

/// The commit checked out, short, and the files that say when it moves
/// (HEAD, the branch's ref, packed refs) to rerun on.
fn git_commit() -> Option<String> {
    let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
    let git_dir = git(&["rev-parse", "--absolute-git-dir"]);
    let common_dir = git(&["rev-parse", "--git-common-dir"]);
    let branch = git(&["symbolic-ref", "-q", "HEAD"]);
    let mut watched = Vec::new();
    if let Some(dir) = &git_dir {
        watched.push(Path::new(dir).join("HEAD"));
    }
    if let Some(common) = &common_dir {
        let common = Path::new(env!("CARGO_MANIFEST_DIR")).join(common);
        watched.push(common.join("packed-refs"));
        if let Some(branch) = &branch {
            watched.push(common.join(branch));
        }
    }
    for path in watched.iter().filter(|path| path.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    Some(commit)
}

/// `YYYY-MM-DD` (UTC) of a Unix time, by the civil-from-days algorithm
/// (Howard Hinnant's `civil_from_days`).
fn date(epoch: i64) -> String {
    let days = epoch.div_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}
