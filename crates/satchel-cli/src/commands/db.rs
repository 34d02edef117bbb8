//! Opening the database for the commands to read (failures are errors),
//! a file or a PostgreSQL server alike (`satchel_store::open`); and
//! `satchel db copy`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use satchel_store::{
    Access, Conversation, ConversationStore, OpenedStore, StoreError, StoreLocation, StoreOptions,
    Timestamp,
};

/// Opens the database to read it; `None` when the file does not exist yet
/// (nothing has been recorded). A file this process may not write is read
/// read-only.
pub(crate) async fn open_for_reading(db: Option<&Path>) -> anyhow::Result<Option<OpenedStore>> {
    let Some(path) = db else {
        bail!("no database location: set --db, SATCHEL_DB, XDG_DATA_HOME or HOME");
    };
    let location = location(path.as_os_str())?;
    if matches!(&location, StoreLocation::File(file) if !file.exists()) {
        return Ok(None);
    }
    let store = match satchel_store::open(&location, StoreOptions::default()).await {
        Err(StoreError::ReadOnly { .. }) => {
            let read_only = StoreOptions {
                access: Access::ReadOnly,
                ..StoreOptions::default()
            };
            satchel_store::open(&location, read_only).await?
        }
        other => other?,
    };
    Ok(Some(store))
}

/// The database `--db`/`SATCHEL_DB` names: a file, or a PostgreSQL URL
/// completed by the `PG*` variables.
pub(crate) fn location(db: &std::ffi::OsStr) -> Result<StoreLocation, StoreError> {
    StoreLocation::parse(db, crate::paths::process_env())
}

/// `satchel db ...`.
pub(crate) async fn run(command: crate::cli::DbCommand) -> anyhow::Result<ExitCode> {
    match command {
        crate::cli::DbCommand::Copy(args) => copy(args).await,
    }
}

/// `satchel db copy --from A --to B`: the whole record, checked by counts.
async fn copy(args: crate::cli::DbCopyArgs) -> anyhow::Result<ExitCode> {
    let from = location(&args.from)?;
    let to = location(&args.to)?;
    if let StoreLocation::File(path) = &from
        && !path.exists()
    {
        bail!("{}: no such database file", path.display());
    }
    let source = satchel_store::open(&from, StoreOptions::default())
        .await
        .with_context(|| format!("opening {}", from.display()))?;
    let target = satchel_store::open(&to, StoreOptions::default())
        .await
        .with_context(|| format!("opening {}", to.display()))?;
    let copied = satchel_store::copy(&source, &target).await;
    source.close().await?;
    target.close().await?;
    let report =
        copied.with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("{:<18} {:>10} {:>10}", "table", "source", "target");
    for (table, source_rows, target_rows) in &report.tables {
        println!("{table:<18} {source_rows:>10} {target_rows:>10}");
    }
    println!(
        "copied {} rows from {} to {}; every table's count matches",
        report.rows(),
        from.display(),
        to.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The conversation `wanted` names (an id or a unique prefix), or the
/// latest one when `wanted` is `None`.
pub(crate) async fn resolve_conversation(
    store: &OpenedStore,
    wanted: Option<&str>,
) -> anyhow::Result<Option<Conversation>> {
    let Some(wanted) = wanted else {
        return Ok(store.latest_conversation().await?);
    };
    if let Some(exact) = store.conversation(wanted).await? {
        return Ok(Some(exact));
    }
    let mut found = store
        .find_conversations(wanted, 6)
        .await
        .context("looking up the conversation")?;
    match found.len() {
        0 => bail!(
            "no conversation matches `{wanted}` in {}; `satchel conversations` lists them",
            store.path().display()
        ),
        1 => Ok(found.pop()),
        _ => {
            let ids: Vec<&str> = found.iter().map(|c| c.id.as_str()).collect();
            bail!(
                "`{wanted}` matches several conversations ({}...); give more of the id",
                ids.join(", ")
            )
        }
    }
}

/// A time for a table: `2025-01-02 03:04:05` (UTC).
pub(crate) fn table_time(time: Timestamp) -> String {
    let text = time.to_rfc3339();
    text.get(..19).unwrap_or(&text).replacen('T', " ", 1)
}
