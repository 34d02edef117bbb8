//! The PostgreSQL schema: embedded migrations, the
//! `satchel_schema_version` table, and the checks that refuse a database
//! that holds another program's tables or a newer Satchel's schema.
//!
//! Everything happens in one transaction that first takes an advisory
//! lock, so processes starting together on an empty database migrate it
//! once; a refusal rolls back before anything was written.

use std::path::Path;

use deadpool_postgres::Object;

use crate::StoreError;
use crate::postgres::failure::classify;

/// The PostgreSQL schema version this build creates and reads.
pub const PG_SCHEMA_VERSION: u32 = 3;

/// The advisory lock key migrations hold ("SACH", as SQLite's application id).
const MIGRATION_LOCK: i64 = 0x5341_4348;

/// One embedded migration.
struct Migration {
    version: u32,
    name: &'static str,
    sql: &'static str,
}

/// Every migration this build carries, oldest first.
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "initial",
        sql: include_str!("../../migrations/postgres/0001_initial.sql"),
    },
    Migration {
        version: 2,
        name: "front_ends",
        sql: include_str!("../../migrations/postgres/0002_front_ends.sql"),
    },
    Migration {
        version: 3,
        name: "call_starts_unindexed",
        sql: include_str!("../../migrations/postgres/0003_call_starts_unindexed.sql"),
    },
];

/// What the current schema holds: its tables, and the versions applied.
struct Found {
    tables: Vec<String>,
    applied: Option<Vec<(u32, String)>>,
}

async fn inspect(
    client: &impl deadpool_postgres::GenericClient,
    path: &Path,
) -> Result<Found, StoreError> {
    let sql = |error| classify(error, path);
    let tables: Vec<String> = client
        .query(
            "SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1",
            &[],
        )
        .await
        .map_err(sql)?
        .iter()
        .map(|row| row.get(0))
        .collect();
    if !tables.iter().any(|t| t == "satchel_schema_version") {
        return Ok(Found {
            tables,
            applied: None,
        });
    }
    let applied = client
        .query(
            "SELECT version, name FROM satchel_schema_version ORDER BY version",
            &[],
        )
        .await
        .map_err(sql)?
        .iter()
        .map(|row| {
            (
                u32::try_from(row.get::<_, i64>(0)).unwrap_or(u32::MAX),
                row.get(1),
            )
        })
        .collect();
    Ok(Found {
        tables,
        applied: Some(applied),
    })
}

/// Refuses another program's tables, a newer schema, and a diverging one.
fn judge(found: &Found, path: &Path) -> Result<(), StoreError> {
    let Some(applied) = &found.applied else {
        if found.tables.is_empty() {
            return Ok(());
        }
        let mut names = found.tables.iter().take(5).cloned().collect::<Vec<_>>();
        if found.tables.len() > 5 {
            names.push("...".into());
        }
        return Err(StoreError::ForeignDatabase {
            path: path.to_path_buf(),
            tables: names.join(", "),
        });
    };
    for (version, name) in applied {
        match MIGRATIONS.iter().find(|m| m.version == *version) {
            None => {
                return Err(StoreError::NewerSchema {
                    path: path.to_path_buf(),
                    found: applied.last().map_or(*version, |(last, _)| *last),
                    known: PG_SCHEMA_VERSION,
                });
            }
            Some(migration) if migration.name != name => {
                return Err(StoreError::SchemaMismatch {
                    path: path.to_path_buf(),
                    version: *version,
                    found: name.clone(),
                    expected: migration.name.to_owned(),
                });
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Checks, reading only, that the schema is this build's (for a read-only store).
pub(crate) async fn check_current(client: &Object, path: &Path) -> Result<(), StoreError> {
    let found = inspect(client, path).await?;
    judge(&found, path)?;
    let have = found
        .applied
        .as_ref()
        .and_then(|applied| applied.last().map(|(version, _)| *version))
        .unwrap_or(0);
    if have != PG_SCHEMA_VERSION {
        return Err(StoreError::NeedsUpgrade {
            path: path.to_path_buf(),
            found: have,
            known: PG_SCHEMA_VERSION,
        });
    }
    Ok(())
}

/// Applies every migration the database lacks, in one transaction under
/// the advisory lock.
pub(crate) async fn migrate(
    client: &mut Object,
    path: &Path,
    now_millis: i64,
) -> Result<(), StoreError> {
    let sql = |error| classify(error, path);
    // Fast path: already current, no lock taken.
    let found = inspect(&*client, path).await?;
    judge(&found, path)?;
    if found
        .applied
        .as_ref()
        .is_some_and(|applied| applied.len() == MIGRATIONS.len())
    {
        return Ok(());
    }
    let tx = client.transaction().await.map_err(sql)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(sql)?;
    // Looked at again under the lock: another process may have migrated.
    let found = inspect(&tx, path).await?;
    judge(&found, path)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS satchel_schema_version (
            version     BIGINT PRIMARY KEY,
            name        TEXT NOT NULL,
            applied_at  BIGINT NOT NULL
        )",
    )
    .await
    .map_err(sql)?;
    let applied = found.applied.unwrap_or_default();
    for migration in MIGRATIONS
        .iter()
        .filter(|m| !applied.iter().any(|(version, _)| *version == m.version))
    {
        tracing::info!(
            database = %path.display(),
            version = migration.version,
            name = migration.name,
            "applying schema migration"
        );
        tx.batch_execute(migration.sql).await.map_err(sql)?;
        tx.execute(
            "INSERT INTO satchel_schema_version (version, name, applied_at) VALUES ($1, $2, $3)",
            &[&i64::from(migration.version), &migration.name, &now_millis],
        )
        .await
        .map_err(sql)?;
    }
    tx.commit().await.map_err(sql)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_from_one_without_gaps() {
        for (index, migration) in MIGRATIONS.iter().enumerate() {
            assert_eq!(migration.version as usize, index + 1, "{}", migration.name);
        }
        assert_eq!(
            MIGRATIONS.last().map(|m| m.version),
            Some(PG_SCHEMA_VERSION)
        );
    }
}
