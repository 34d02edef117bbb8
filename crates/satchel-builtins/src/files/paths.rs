//! The one resolver of the file tools' paths against the sandbox's
//! writable roots: every tool that reads or writes a file by name gets
//! its path from here, so one rule bounds them all.
//!
//! A relative path is the project's. For writing, the path is resolved
//! on disk first: the deepest part that exists is canonicalised (its
//! symlinks and `..` followed as the kernel would), the rest must be
//! plain names; the real path must lie beneath one of the call's
//! writable paths ([`satchel_tools::sandbox::writable_paths`]) and
//! outside the protected ones (`.agents`, `.git/hooks`, `.git/config`).
//! The write then goes to that real path, so a symlink inside the
//! project stays a symlink. A hard link's other name cannot be told from
//! a path, but it does not matter here: writes replace the file by a
//! rename ([`super::atomic`]), which never changes the inode another name
//! shares.
//!
//! What is not here: permission rules on paths (the policy), reading
//! limits (a confined call reads anywhere, like a sandboxed command).

use std::path::{Component, Path, PathBuf};

use satchel_core::ErrorCode;
use satchel_tools::sandbox::{Confinement, protected_paths, writable_paths};
use satchel_tools::{ToolContext, ToolError};

/// `raw` as an absolute path: relative paths are the project's; `~/` is
/// not expanded (a model should not guess the user's home).
pub(crate) fn absolute(ctx: &ToolContext, raw: &str) -> Result<PathBuf, ToolError> {
    if raw.trim().is_empty() {
        return Err(ToolError::new(
            ErrorCode::InvalidParams,
            "the path is empty; give a file path, absolute or relative to the project",
        ));
    }
    if raw.contains('\0') {
        return Err(ToolError::new(
            ErrorCode::InvalidParams,
            "the path contains a NUL character, which no file name can",
        ));
    }
    Ok(ctx.working_dir.join(raw))
}

/// Where a write to `raw` really goes, or why it may not: refused in
/// `readonly`, and in `workspace` anywhere but beneath the writable paths
/// and outside the protected ones.
pub(crate) fn for_writing(ctx: &ToolContext, raw: &str, tool: &str) -> Result<PathBuf, ToolError> {
    let path = absolute(ctx, raw)?;
    let Some(roots) = writable_paths(ctx) else {
        return Ok(path);
    };
    if ctx.confinement == Confinement::ReadOnly {
        return Err(ToolError::new(
            ErrorCode::PermissionDenied,
            format!(
                "`{tool}` is refused: the mode is `readonly`, in which no file may be changed. \
                 Tell the user what you would change instead."
            ),
        ));
    }
    let real = real_path(&path, 0)?;
    let inside = roots
        .iter()
        .filter_map(|root| std::fs::canonicalize(root).ok())
        .any(|root| real.starts_with(&root));
    if !inside {
        return Err(ToolError::new(
            ErrorCode::PermissionDenied,
            format!(
                "`{raw}` resolves to `{}`, outside the paths this session may write ({}); \
                 the `workspace` mode writes only there. Write inside the project, or ask the user.",
                real.display(),
                roots
                    .iter()
                    .map(|root| format!("`{}`", root.display()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    let project =
        std::fs::canonicalize(&ctx.working_dir).unwrap_or_else(|_| ctx.working_dir.clone());
    for protected in protected_paths(&project) {
        let protected = std::fs::canonicalize(&protected).unwrap_or(protected);
        if real.starts_with(&protected) {
            return Err(ToolError::new(
                ErrorCode::PermissionDenied,
                format!(
                    "`{raw}` is under `{}`, which no tool may change in the `workspace` mode \
                     (it holds the policy, or code that runs later outside the sandbox); ask the user to change it.",
                    protected.display()
                ),
            ));
        }
    }
    Ok(real)
}

/// Dangling symlinks followed by hand at most (the kernel's own limit).
const MAX_LINKS: usize = 40;

/// The real path of `path`: its deepest existing ancestor canonicalised,
/// then the names beneath it, which must not climb (`..`).
fn real_path(path: &Path, links: usize) -> Result<PathBuf, ToolError> {
    if links > MAX_LINKS {
        return Err(ToolError::new(
            ErrorCode::InvalidParams,
            format!("`{}` goes through too many symlinks", path.display()),
        ));
    }
    let mut existing = path.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        // A dangling symlink exists as a link but cannot be canonicalised:
        // its target is where a write would go, so follow it by hand.
        if let Ok(meta) = std::fs::symlink_metadata(&existing) {
            if meta.file_type().is_symlink() && std::fs::metadata(&existing).is_err() {
                let target = std::fs::read_link(&existing).map_err(io_error(&existing))?;
                let parent = existing.parent().unwrap_or(Path::new("/"));
                let mut real = real_path(&parent.join(target), links + 1)?;
                real.extend(rest.iter().rev());
                return Ok(real);
            }
            let mut real = std::fs::canonicalize(&existing).map_err(io_error(&existing))?;
            real.extend(rest.iter().rev());
            return Ok(real);
        }
        let (Some(parent), Some(name)) = (existing.parent(), existing.file_name()) else {
            return Err(ToolError::new(
                ErrorCode::InvalidParams,
                format!("`{}` has no existing directory above it", path.display()),
            ));
        };
        rest.push(name.to_owned());
        existing = parent.to_path_buf();
        if existing
            .components()
            .next_back()
            .is_some_and(|c| matches!(c, Component::ParentDir | Component::CurDir))
        {
            // `missing/..` cannot be resolved on disk; the kernel refuses it.
            return Err(ToolError::new(
                ErrorCode::InvalidParams,
                format!(
                    "`{}` goes through a directory that does not exist and then `..`; give a plain path",
                    path.display()
                ),
            ));
        }
    }
}

fn io_error(path: &Path) -> impl Fn(std::io::Error) -> ToolError + '_ {
    move |error| {
        ToolError::new(
            ErrorCode::InvalidParams,
            format!("cannot resolve `{}`: {error}", path.display()),
        )
    }
}

/// `path` as the model should see it: relative to the project when it is
/// inside it, absolute otherwise.
pub(crate) fn shown(ctx: &ToolContext, path: &Path) -> String {
    let project = &ctx.working_dir;
    if let Ok(relative) = path.strip_prefix(project) {
        return relative.display().to_string();
    }
    if let Ok(project) = std::fs::canonicalize(project)
        && let Ok(relative) = path.strip_prefix(&project)
    {
        return relative.display().to_string();
    }
    path.display().to_string()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use satchel_tools::ToolsConfig;

    fn ctx(project: &Path, confinement: Confinement) -> ToolContext {
        let mut ctx =
            ToolContext::standalone("t", project.to_path_buf(), Arc::new(ToolsConfig::default()));
        ctx.confinement = confinement;
        ctx.writable_roots = Some(Arc::from(vec![project.to_path_buf()]));
        ctx
    }

    #[test]
    fn writes_stay_beneath_the_roots_and_outside_the_protected_paths() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(project.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(project.join(".agents")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, project.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.join("nothing"), project.join("dangling")).unwrap();
        let ctx = ctx(&project, Confinement::Workspace);
        let real = std::fs::canonicalize(&project).unwrap();
        assert_eq!(
            for_writing(&ctx, "src/new.rs", "write").unwrap(),
            real.join("src/new.rs")
        );
        for refused in [
            "../outside/x",
            "link/x",
            "dangling",
            outside.join("x").to_str().unwrap(),
            ".agents/agent.json",
            ".git/hooks/pre-commit",
            ".git/config",
            "missing/../../outside/x",
        ] {
            let error = for_writing(&ctx, refused, "write").unwrap_err();
            assert!(
                matches!(
                    error.code,
                    ErrorCode::PermissionDenied | ErrorCode::InvalidParams
                ),
                "{refused}: {error}"
            );
        }
        assert!(for_writing(&ctx, ".git/info/exclude", "write").is_ok());
        let readonly = self::ctx(&project, Confinement::ReadOnly);
        assert_eq!(
            for_writing(&readonly, "a.txt", "edit").unwrap_err().code,
            ErrorCode::PermissionDenied
        );
        let trust = self::ctx(&project, Confinement::Unconfined);
        assert!(for_writing(&trust, "../outside/x", "write").is_ok());
    }
}
