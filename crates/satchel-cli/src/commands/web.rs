//! `satchel web`: the record in a browser, until Ctrl-C or SIGTERM.

use std::process::ExitCode;
use std::sync::Arc;

use satchel_host::Host;
use satchel_web::WebOptions;
use tokio_util::sync::CancellationToken;

use crate::cli::WebArgs;

pub(crate) async fn run(args: WebArgs, project: &Arc<Host>) -> anyhow::Result<ExitCode> {
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        super::signals::wait_for_interrupt().await;
        stop.cancel();
    });
    let token = args.token.filter(|t| !t.is_empty());
    let shown_token = token.clone();
    let options = WebOptions {
        addr: args.addr,
        token,
        allowed_hosts: args.allow_host,
    };
    let result = satchel_web::serve(project.clone(), options, shutdown, move |addr| {
        let query = shown_token
            .map(|token| format!("?token={token}"))
            .unwrap_or_default();
        // The one line a user (or a test) needs: where to point the browser.
        eprintln!("satchel web: serving http://{addr}/{query} (Ctrl-C stops)");
    })
    .await;
    project.close().await;
    result?;
    Ok(ExitCode::SUCCESS)
}
