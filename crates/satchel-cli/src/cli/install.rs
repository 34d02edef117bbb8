//! Command-line syntax of what installing Satchel needs: the version line,
//! shell completions and the manual page.

use std::path::PathBuf;

use clap::Args;

/// `satchel --version`: the version, the commit and the build date
/// (`crates/satchel-cli/build.rs`).
pub(crate) const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("SATCHEL_COMMIT"),
    " ",
    env!("SATCHEL_BUILD_DATE"),
    ")"
);

pub(crate) const COMPLETIONS_EXAMPLES: &str = "\
Examples:
  satchel completions bash > ~/.local/share/bash-completion/completions/satchel
  satchel completions zsh > \"${fpath[1]}/_satchel\"
  satchel completions fish > ~/.config/fish/completions/satchel.fish";

// `satchel completions`.
#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    pub(crate) shell: clap_complete::Shell,
}

// `satchel man` (hidden: for packagers).
#[derive(Debug, Args)]
pub(crate) struct ManArgs {
    /// Write satchel.1 and a page per subcommand (satchel-mcp-serve.1...)
    /// into this directory instead of printing satchel.1.
    #[arg(long, value_name = "DIR")]
    pub(crate) out_dir: Option<PathBuf>,
}
