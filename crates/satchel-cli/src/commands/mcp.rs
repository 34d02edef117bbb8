//! `satchel mcp ...`: serve Satchel's tools over MCP, list the MCP servers
//! Satchel uses; `connect`, `login` and `logout` are in `mcp_remote`.

use std::io::Write;

use std::process::ExitCode;
use std::sync::Arc;

use satchel_mcp::conformance::ConformanceServer;
use satchel_mcp::diagnostic::{self, EchoTool};
use satchel_mcp::http::{self, HttpOptions};
use satchel_mcp::{SatchelServer, ServerOptions, ServerState, ServerStatus, serve_stdio};
use tokio_util::sync::CancellationToken;

use satchel_store::AuditSource;

use crate::cli::{ListArgs, McpCommand, ServeArgs};
use satchel_host::Host;

pub(crate) async fn run(command: McpCommand, project: &Arc<Host>) -> anyhow::Result<ExitCode> {
    let data = project.paths.data.as_deref();
    match command {
        McpCommand::Serve(args) => serve(*args, project).await,
        McpCommand::Servers(args) => servers(args, project).await,
        McpCommand::Connect(args) => super::mcp_remote::connect(*args, data).await,
        McpCommand::Login(args) => {
            let config = satchel_host::loaders::load_mcp_config(project);
            super::mcp_remote::login(args, &config, data).await
        }
        McpCommand::Logout(args) => {
            let config = satchel_host::loaders::load_mcp_config(project);
            super::mcp_remote::logout(args, &config, data)
        }
        McpCommand::Import(args) => super::mcp_import::run(args, project),
    }
}

/// `mcp serve`: the registry (kept current) behind an MCP server, until
/// the client leaves (stdio) or a signal arrives.
async fn serve(args: ServeArgs, project: &Arc<Host>) -> anyhow::Result<ExitCode> {
    // Imported tools arrive while serving; clients hear of them through
    // `notifications/tools/list_changed`.
    let live = project.shared_tools().await?;
    if args.echo_tool {
        live.set_extra_tools(diagnostic::GROUP, vec![Arc::new(EchoTool::new())])?;
    }

    let shutdown = CancellationToken::new();
    let on_signal = shutdown.clone();
    tokio::spawn(async move {
        super::signals::wait_for_interrupt().await;
        on_signal.cancel();
    });
    let options = ServerOptions {
        channel: if args.http.is_some() {
            "mcp-http"
        } else {
            "mcp-stdio"
        }
        .into(),
        working_dir: project.root.clone(),
        config: satchel_host::loaders::config_loader(project),
        policy: satchel_host::loaders::policy_loader(project),
        observer: Some(Arc::new(
            satchel_host::AuditObserver::new(project.store.clone(), AuditSource::Mcp)
                .with_hooks(project.call_hooks(AuditSource::Mcp))
                .answering_before_the_end_commits(),
        )),
        resources: Some(Arc::new(satchel_host::resources::HostResources::new(
            project.clone(),
        ))),
        on_session_end: Some({
            let processes = project.processes.clone();
            Arc::new(move |session: String| {
                let processes = processes.clone();
                Box::pin(async move { processes.end_owner(&session).await })
            })
        }),
    };
    let server = SatchelServer::new(live.clone(), options);
    let served = if args.conformance_fixtures {
        let server = ConformanceServer::new(server)?;
        // Stderr: stdout may carry the protocol.
        eprintln!("satchel: conformance fixture mode (diagnostic, not for real clients)");
        serve_with(server, &args, &shutdown).await
    } else {
        serve_with(server, &args, &shutdown).await
    };
    shutdown.cancel();
    // Queued audit writes reach the database before the process ends.
    project.close().await;
    served?;
    Ok(ExitCode::SUCCESS)
}

/// Serves `server` over stdio or, with `--http`, streamable HTTP, until
/// the client leaves or `shutdown` fires.
async fn serve_with<S: satchel_mcp::PerSession>(
    server: S,
    args: &ServeArgs,
    shutdown: &CancellationToken,
) -> Result<(), satchel_mcp::McpError> {
    let Some(addr) = args.http else {
        return serve_stdio(server, shutdown.clone()).await;
    };
    let options = HttpOptions {
        addr,
        token: args.token.clone(),
        allowed_origins: args.allow_origins.clone(),
    };
    let bound = http::bind(server, options, shutdown.clone())
        .await?
        .with_limits(args.limits());
    let local = bound.local_addr()?;
    // stderr: stdout stays free for results.
    eprintln!("satchel: serving MCP at http://{local}{}", http::ENDPOINT);
    bound.serve().await
}

/// `mcp servers`: start each server, report, stop.
async fn servers(args: ListArgs, project: &Host) -> anyhow::Result<ExitCode> {
    let live = Arc::new(project.tools(false).await?);
    let manager = satchel_host::loaders::start_mcp_in_background(&live, project);
    manager.ready().await;
    let statuses = manager.statuses();
    manager.shutdown().await;

    let mut stdout = std::io::stdout().lock();
    if args.json {
        writeln!(stdout, "{}", serde_json::to_string_pretty(&statuses)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if statuses.is_empty() {
        writeln!(
            stdout,
            "no MCP servers configured: declare them in .agents/mcp.json or $XDG_CONFIG_HOME/satchel/mcp.json"
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let width = statuses
        .iter()
        .map(|s| s.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    writeln!(
        stdout,
        "{:width$}  {:10}  {:>5}  DETAIL",
        "NAME", "STATE", "TOOLS"
    )?;
    for status in &statuses {
        writeln!(
            stdout,
            "{:width$}  {:10}  {:>5}  {}",
            status.name,
            status.state.label(),
            status.tools.len(),
            detail(status)
        )?;
        if !status.tools.is_empty() {
            let names: Vec<&str> = status.tools.iter().map(|t| t.name.as_str()).collect();
            writeln!(stdout, "{:width$}  tools: {}", "", names.join(", "))?;
        }
        for note in &status.notes {
            writeln!(stdout, "{:width$}  note: {note}", "")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The transport when all is well, the reason when not.
fn detail(status: &ServerStatus) -> String {
    match &status.state {
        ServerState::Failed { reason } | ServerState::NeedsLogin { reason } => reason.clone(),
        ServerState::Restarting { reason, .. } => reason.clone(),
        _ => status.transport.clone(),
    }
}
