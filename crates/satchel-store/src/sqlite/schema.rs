//! Opening a database file safely and bringing its schema up to date: the
//! embedded migrations, the `schema_version` table, and the checks that
//! keep Satchel from touching a file that is not its own, is corrupt, or
//! was made by a newer Satchel.
//!
//! Order matters: everything that can refuse a file (not a database,
//! another program's database, a newer schema) is decided by reading only,
//! before the first write (switching to WAL, migrating).

use std::fs::{DirBuilder, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use crate::StoreError;
use crate::sqlite::failure::{classify, classify_on};
use crate::sqlite::{Access, StoreOptions};

/// The SQLite `application_id` header field of every Satchel database ("SACH").
pub const APPLICATION_ID: i32 = 0x5341_4348;

/// The schema version this build creates and reads.
pub const SCHEMA_VERSION: u32 = 10;

/// One embedded migration.
pub(crate) struct Migration {
    /// Its version, from 1 up, increasing (see the test on numbering).
    pub(crate) version: u32,
    /// A short name, recorded in `schema_version` and checked on open.
    pub(crate) name: &'static str,
    /// The SQL, run in the migration transaction.
    pub(crate) sql: &'static str,
}

/// Every migration this build carries, oldest first.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "initial",
        sql: include_str!("../../migrations/0001_initial.sql"),
    },
    Migration {
        version: 2,
        name: "code",
        sql: include_str!("../../migrations/0002_code.sql"),
    },
    Migration {
        version: 3,
        name: "llm_calls",
        sql: include_str!("../../migrations/0003_llm_calls.sql"),
    },
    Migration {
        version: 4,
        name: "memory",
        sql: include_str!("../../migrations/0004_memory.sql"),
    },
    Migration {
        version: 5,
        name: "conversation_search",
        sql: include_str!("../../migrations/0005_conversation_search.sql"),
    },
    Migration {
        version: 6,
        name: "memory_index",
        sql: include_str!("../../migrations/0006_memory_index.sql"),
    },
    Migration {
        version: 7,
        name: "call_starts",
        sql: include_str!("../../migrations/0007_call_starts.sql"),
    },
    Migration {
        version: 8,
        name: "front_ends",
        sql: include_str!("../../migrations/0008_front_ends.sql"),
    },
    Migration {
        version: 9,
        name: "call_starts_unindexed",
        sql: include_str!("../../migrations/0009_call_starts_unindexed.sql"),
    },
    Migration {
        version: 10,
        name: "call_journals",
        sql: include_str!("../../migrations/0010_call_journals.sql"),
    },
];

/// The schema version this build creates and expects.
pub(crate) fn latest_version() -> u32 {
    SCHEMA_VERSION
}

/// Opens the connection the writer owns, creating and migrating the
/// database as `options.access` allows.
pub(crate) fn open_writer(
    path: &Path,
    options: &StoreOptions,
    now_millis: i64,
) -> Result<Connection, StoreError> {
    let conn = match options.access {
        Access::ReadWrite => open_read_write(path, options, now_millis),
        Access::ReadOnly => {
            let conn = open_existing_read_only(path, options)?;
            match inspect(&conn, path)? {
                Some(found) if found == latest_version() => Ok(conn),
                found => Err(StoreError::NeedsUpgrade {
                    path: path.to_path_buf(),
                    found: found.unwrap_or(0),
                    known: latest_version(),
                }),
            }
        }
    }?;
    plan_without_bound_values(&conn);
    Ok(conn)
}

/// Query plans are chosen without looking at bound values (SQLite's
/// query planner stability guarantee). Otherwise SQLite marks a statement
/// whose plan a value might change (an equality's guessed selectivity, a
/// bound `LIMIT`) to be compiled again once that value is rebound, and
/// rusqlite clears a cached statement's bindings as it takes it back: such
/// statements were compiled anew on every use (each log entry's sequence
/// number, every `LIMIT ?1`). A hint: a connection that refuses it still
/// answers correctly.
fn plan_without_bound_values(conn: &Connection) {
    if let Err(error) = conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true) {
        tracing::debug!(%error, "the connection keeps re-planning on bound values");
    }
}

/// Opens a read-only connection for queries.
pub(crate) fn open_reader(path: &Path, options: &StoreOptions) -> Result<Connection, StoreError> {
    let conn = open_existing_read_only(path, options)?;
    plan_without_bound_values(&conn);
    // Keyword search reads many index pages per query: keep them in a
    // larger cache and map the file instead of copying pages in. Hints
    // only: a connection that refuses them still reads correctly.
    for (pragma, value) in [("cache_size", -32_768i64), ("mmap_size", 268_435_456)] {
        if let Err(error) = conn.pragma_update(None, pragma, value) {
            tracing::debug!(%error, pragma, "a reader ignored a performance setting");
        }
    }
    Ok(conn)
}

fn open_existing_read_only(path: &Path, options: &StoreOptions) -> Result<Connection, StoreError> {
    if !path.exists() {
        return Err(StoreError::CannotOpen {
            path: path.to_path_buf(),
            reason: "no such file".into(),
        });
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|error| classify(error, path))?;
    conn.busy_timeout(options.busy_timeout)
        .map_err(|error| classify(error, path))?;
    let probe = conn.query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(()));
    let Err(error) = probe else {
        return Ok(conn);
    };
    // A WAL database needs its -shm file to be read; in a directory we may
    // not write, SQLite cannot create it. When there is no -wal file either,
    // the main file holds every commit and can be read as immutable.
    let wal = PathBuf::from(format!("{}-wal", path.display()));
    let cannot_init = matches!(
        error.sqlite_error_code(),
        Some(rusqlite::ErrorCode::ReadOnly | rusqlite::ErrorCode::CannotOpen)
    );
    if !cannot_init || wal.exists() {
        return Err(classify(error, path));
    }
    drop(conn);
    let uri = format!("file:{}?immutable=1", uri_path(path));
    let conn = Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI)
        .map_err(|error| classify(error, path))?;
    tracing::debug!(path = %path.display(), "reading a database in a read-only directory as immutable");
    Ok(conn)
}

/// `path` percent-encoded for an SQLite `file:` URI.
fn uri_path(path: &Path) -> String {
    use std::fmt::Write;
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = String::new();
    for byte in absolute.as_os_str().as_encoded_bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                out.push(char::from(*byte));
            }
            other => {
                let _ = write!(out, "%{other:02X}");
            }
        }
    }
    out
}

fn open_read_write(
    path: &Path,
    options: &StoreOptions,
    now_millis: i64,
) -> Result<Connection, StoreError> {
    prepare_file(path)?;
    let sql = |error| classify(error, path);
    let mut conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sql)?;
    let sql = |error| classify_on(&conn, error, path);
    conn.busy_timeout(options.busy_timeout).map_err(sql)?;
    // SQLite quietly falls back to read-only when the file is write-protected.
    if conn.is_readonly(rusqlite::MAIN_DB).map_err(sql)? {
        return Err(StoreError::ReadOnly {
            path: path.to_path_buf(),
        });
    }
    let found = inspect(&conn, path)?;

    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "wal", |row| row.get(0))
        .map_err(sql)?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(
            path = %path.display(),
            %mode,
            "the database could not switch to WAL mode (a file system without shared memory?); writes will block readers"
        );
    }
    conn.pragma_update(None, "synchronous", options.durability.pragma_value())
        .map_err(sql)?;
    conn.pragma_update(None, "foreign_keys", true)
        .map_err(sql)?;
    if let Some(max_bytes) = options.max_size_bytes {
        let page_size: u64 = conn
            .pragma_query_value(None, "page_size", |row| row.get(0))
            .map_err(sql)?;
        let pages = max_bytes.div_ceil(page_size.max(1)).max(1);
        conn.pragma_update(None, "max_page_count", pages)
            .map_err(sql)?;
    }
    if found != Some(latest_version()) || !migrations_recorded(&conn, path)? {
        migrate(&mut conn, path, now_millis)?;
    }
    Ok(conn)
}

/// True when `schema_version` names every migration this build carries,
/// each by its name: the common case, decided by reading, so an up-to-date
/// file is opened without taking the write lock.
fn migrations_recorded(conn: &Connection, path: &Path) -> Result<bool, StoreError> {
    let mut statement = conn
        .prepare("SELECT version, name FROM schema_version ORDER BY version")
        .map_err(|error| classify(error, path))?;
    let applied = statement
        .query_map([], |row| {
            Ok((row.get::<_, u32>(0)?, row.get::<_, String>(1)?))
        })
        .map_err(|error| classify(error, path))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| classify(error, path))?;
    Ok(applied.len() == MIGRATIONS.len()
        && applied
            .iter()
            .zip(MIGRATIONS)
            .all(|((version, name), migration)| {
                *version == migration.version && name == migration.name
            }))
}

/// Creates the directory (user-only) and the file (user read/write) when
/// missing, and refuses early when either cannot be written.
fn prepare_file(path: &Path) -> Result<(), StoreError> {
    let io = |source: std::io::Error, at: &Path| StoreError::Io {
        path: at.to_path_buf(),
        source,
    };
    let read_only = || StoreError::ReadOnly {
        path: path.to_path_buf(),
    };
    let dir = path
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.exists() {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|error| io(error, dir))?;
    }
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => return Ok(()),
        Err(error) if error.kind() == ErrorKind::AlreadyExists => {}
        Err(error) if is_read_only_error(&error) => return Err(read_only()),
        Err(error) => return Err(io(error, path)),
    }
    // The file exists: SQLite must be able to write it, and to create its
    // -wal and -shm files beside it.
    for target in [path, dir] {
        if let Err(errno) = rustix::fs::access(target, rustix::fs::Access::WRITE_OK) {
            let error = std::io::Error::from(errno);
            if is_read_only_error(&error) {
                return Err(read_only());
            }
            return Err(io(error, target));
        }
    }
    Ok(())
}

fn is_read_only_error(error: &std::io::Error) -> bool {
    error.kind() == ErrorKind::PermissionDenied
        || error.kind() == ErrorKind::ReadOnlyFilesystem
        || error.raw_os_error() == Some(rustix::io::Errno::ROFS.raw_os_error())
}

/// Reads what the file holds, without writing: `None` for an empty
/// database, else its schema version. Refuses files that are not
/// databases, other programs' databases and newer schemas.
fn inspect(conn: &Connection, path: &Path) -> Result<Option<u32>, StoreError> {
    let sql = |error| classify(error, path);
    let application_id: i32 = conn
        .pragma_query_value(None, "application_id", |row| row.get(0))
        .map_err(sql)?;
    let (objects, has_versions): (i64, bool) = conn
        .query_row(
            "SELECT count(*), coalesce(sum(type = 'table' AND name = 'schema_version'), 0) > 0 FROM sqlite_schema",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .map_err(sql)?;
    let foreign =
        (application_id != 0 && application_id != APPLICATION_ID) || (objects > 0 && !has_versions);
    if foreign {
        return Err(StoreError::NotSatchel {
            path: path.to_path_buf(),
        });
    }
    if !has_versions {
        return Ok(None);
    }
    let found: u32 = conn
        .query_row(
            "SELECT coalesce(max(version), 0) FROM schema_version",
            [],
            |row| row.get(0),
        )
        .map_err(sql)?;
    if found > latest_version() {
        return Err(StoreError::NewerSchema {
            path: path.to_path_buf(),
            found,
            known: latest_version(),
        });
    }
    Ok(Some(found))
}

/// Applies every migration the file lacks, all in one transaction.
fn migrate(conn: &mut Connection, path: &Path, now_millis: i64) -> Result<(), StoreError> {
    let sql = |error| classify(error, path);
    // Cannot use `classify_on` here: the transaction holds `conn` mutably.
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql)?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_version (
            version     INTEGER PRIMARY KEY,
            name        TEXT NOT NULL,
            applied_at  INTEGER NOT NULL
        ) STRICT",
    )
    .map_err(sql)?;
    let applied: Vec<(u32, String)> = {
        let mut statement = tx
            .prepare("SELECT version, name FROM schema_version ORDER BY version")
            .map_err(sql)?;
        statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .map_err(sql)?
            .collect::<Result<_, _>>()
            .map_err(sql)?
    };
    // Checked again inside the write lock: another process may have
    // migrated between our first look and now.
    for (version, name) in &applied {
        match MIGRATIONS.iter().find(|m| m.version == *version) {
            None => {
                return Err(StoreError::NewerSchema {
                    path: path.to_path_buf(),
                    found: applied.last().map_or(*version, |(last, _)| *last),
                    known: latest_version(),
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
    let pending = MIGRATIONS
        .iter()
        .filter(|m| !applied.iter().any(|(version, _)| *version == m.version));
    let mut changed = false;
    for migration in pending {
        tracing::info!(
            path = %path.display(),
            version = migration.version,
            name = migration.name,
            "applying schema migration"
        );
        tx.execute_batch(migration.sql).map_err(sql)?;
        tx.execute(
            "INSERT INTO schema_version (version, name, applied_at) VALUES (?1, ?2, ?3)",
            (migration.version, migration.name, now_millis),
        )
        .map_err(sql)?;
        changed = true;
    }
    if changed {
        tx.pragma_update(None, "application_id", APPLICATION_ID)
            .map_err(sql)?;
        tx.pragma_update(None, "user_version", latest_version())
            .map_err(sql)?;
        tx.commit().map_err(sql)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_from_one_without_gaps() {
        for (index, migration) in MIGRATIONS.iter().enumerate() {
            assert_eq!(migration.version as usize, index + 1, "{}", migration.name);
            assert!(!migration.name.is_empty());
        }
        assert_eq!(MIGRATIONS.first().map(|m| m.version), Some(1));
        assert_eq!(
            MIGRATIONS.last().map(|m| m.version),
            Some(SCHEMA_VERSION),
            "SCHEMA_VERSION must name the last migration"
        );
    }

    /// rusqlite clears a cached statement's bindings as it takes it back,
    /// which made SQLite compile again any statement whose plan a bound
    /// value might change.
    #[test]
    fn cached_statements_are_not_compiled_again_for_each_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plans.db");
        let writer = open_writer(&path, &StoreOptions::default(), 0).unwrap();
        let reader = open_reader(&path, &StoreOptions::default()).unwrap();
        let sql =
            "SELECT coalesce(max(seq), 0) + 1 FROM log_entries WHERE conversation_id = ?1 LIMIT ?2";
        for conn in [&writer, &reader] {
            for n in 0..5 {
                let next: i64 = conn
                    .prepare_cached(sql)
                    .unwrap()
                    .query_row(rusqlite::params![format!("c{n}"), n + 1], |row| row.get(0))
                    .unwrap();
                assert_eq!(next, 1);
            }
            let statement = conn.prepare_cached(sql).unwrap();
            let compiled_again = statement.get_status(rusqlite::StatementStatus::RePrepare);
            assert_eq!(compiled_again, 0);
        }
    }

    #[test]
    fn uri_paths_are_percent_encoded() {
        assert_eq!(
            uri_path(Path::new("/tmp/a b/c?d#e%f/ü.db")),
            "/tmp/a%20b/c%3Fd%23e%25f/%C3%BC.db"
        );
    }

    #[test]
    fn every_migration_runs_on_an_empty_database() {
        let conn = Connection::open_in_memory().unwrap();
        for migration in MIGRATIONS {
            conn.execute_batch(migration.sql).unwrap();
        }
    }
}
