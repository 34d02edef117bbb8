//! [`Mode`]: the default for calls no rule matches and the sandbox of
//! commands, as `permissions.mode` and `--mode` name it.

use std::fmt;

/// The default for calls no rule matches, and the sandbox of commands
/// (see [`crate::sandbox`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mode {
    /// Commands run in a sandbox that writes nowhere but a private `/tmp`;
    /// other tools only if read-only.
    ReadOnly,
    /// Commands run in a sandbox that writes only in the project; other
    /// tools that are read-only or change only Satchel's own records run,
    /// the rest ask.
    #[default]
    Workspace,
    /// Everything runs, unsandboxed.
    Trust,
}

impl Mode {
    /// The mode named `text`; `default` is the old name of `workspace`.
    pub fn parse(text: &str) -> Option<Mode> {
        match text {
            "workspace" | "default" => Some(Mode::Workspace),
            "readonly" => Some(Mode::ReadOnly),
            "trust" => Some(Mode::Trust),
            _ => None,
        }
    }

    /// How this mode confines a call's processes.
    pub fn confinement(self) -> crate::sandbox::Confinement {
        use crate::sandbox::Confinement;
        match self {
            Mode::ReadOnly => Confinement::ReadOnly,
            Mode::Workspace => Confinement::Workspace,
            Mode::Trust => Confinement::Unconfined,
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::ReadOnly => "readonly",
            Mode::Workspace => "workspace",
            Mode::Trust => "trust",
        })
    }
}
