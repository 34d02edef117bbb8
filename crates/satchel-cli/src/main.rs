//! The `satchel` binary: parses the command line and hands off to the
//! library crates. Only this crate prints to the terminal, uses `anyhow`
//! and chooses exit codes.

// clap turns the syntax's doc comments into `--help`, where a URL written
// as rustdoc wants it (`<https://...>`) would print its brackets.
#[allow(rustdoc::bare_urls)]
mod cli;
mod commands;
mod paths;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    init_tracing(cli.verbose);
    // Before any child (doctor's probes, a browser, the runner's commands).
    satchel_exec::make_children_reapable();
    // The token vocabularies are built on their first use on a machine and
    // cached here (nothing is read or written until something counts).
    if let Some(cache) = paths::user_cache_dir() {
        satchel_llm::set_token_cache_dir(cache.join("tokens"));
    }
    let mut builder = if cli.command.serves() {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(code) => code,
        // The reader left (`satchel ... | head`): nothing to say, as for
        // any Unix tool the pipe closed on (128 + SIGPIPE).
        Err(error) if is_broken_pipe(&error) => ExitCode::from(141),
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// True when `error` comes from writing to a closed pipe.
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Secrets replaced in every log line, at every verbosity: from the
/// environment's conventional names at start, widened with agent.json's
/// `redaction` once a project is read ([`set_log_redactor`]).
static LOG_REDACTOR: std::sync::LazyLock<std::sync::RwLock<satchel_core::redact::Redactor>> =
    std::sync::LazyLock::new(|| {
        std::sync::RwLock::new(satchel_core::redact::Redactor::from_env(
            &satchel_core::redact::RedactionConfig::default(),
            paths::process_env(),
        ))
    });

/// Makes every later log line redact what `redactor` does.
pub(crate) fn set_log_redactor(redactor: satchel_core::redact::Redactor) {
    if let Ok(mut current) = LOG_REDACTOR.write() {
        *current = redactor;
    }
}

/// Stderr for logs, with secrets replaced: tracing writes each event
/// whole, so a secret is never split across two writes.
struct RedactingStderr;

impl std::io::Write for RedactingStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let redacted = match LOG_REDACTOR.read() {
            Ok(redactor) => redactor.redact_str(&text).into_owned(),
            // A writer that panicked mid-update: say nothing rather than leak.
            Err(_) => return Ok(buf.len()),
        };
        std::io::stderr().write_all(redacted.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Logs go to stderr; stdout is for results. `RUST_LOG` overrides `-v`.
fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    // rmcp's own logs name its types and report, as warnings and errors,
    // what Satchel handles and reports itself in words (a stream resumed,
    // an authorization challenge answered, a server gone): off unless
    // RUST_LOG asks for them.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("{default},rmcp=off")));
    // rmcp's OAuth module logs the authorization code (and token
    // responses) at debug: never below warn there, whatever RUST_LOG says.
    let filter = match "rmcp::transport::auth=warn".parse() {
        Ok(directive) => filter.add_directive(directive),
        Err(_) => filter,
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| RedactingStderr)
        .with_ansi(crate::paths::color(&std::io::stderr()))
        .with_target(false)
        .without_time()
        .init();
}
