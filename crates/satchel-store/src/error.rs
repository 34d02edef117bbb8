//! [`StoreError`]: every way a store operation can fail, in terms that do
//! not depend on the backend (SQLite today, PostgreSQL later).
//!
//! How SQLite's result codes map onto these variants lives in
//! `sqlite::failure`, the one place that knows them.

use std::path::PathBuf;

/// Why a store operation failed.
///
/// Every variant that concerns the database file names its path, so that a
/// message printed as is tells the user which file to look at.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database file or its directory cannot be opened or created
    /// (missing permissions on a parent, a path through a regular file...).
    /// Produced by `open`; not retryable until the path is fixed.
    #[error("cannot open the database `{}`: {reason}", path.display())]
    CannotOpen {
        /// The database file.
        path: PathBuf,
        /// What the operating system or SQLite said.
        reason: String,
    },
    /// The file is not an SQLite database, or its pages are damaged.
    /// Produced by `open` and by any operation that reads a damaged page.
    /// Not retryable; the file is left exactly as it was.
    #[error(
        "`{}` is not a valid database or is corrupt ({reason}); it was left untouched: move it away or use --db to choose another file",
        path.display()
    )]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        reason: String,
    },
    /// The file is an SQLite database that belongs to another program.
    /// Produced by `open`; not retryable. The file is not changed.
    #[error(
        "`{}` is an SQLite database but not Satchel's; refusing to change it: use --db to choose another file",
        path.display()
    )]
    NotSatchel {
        /// The database file.
        path: PathBuf,
    },
    /// The PostgreSQL database (its current schema) holds tables and none
    /// of them is Satchel's version table: another program's data.
    /// Produced by `open`; not retryable. Nothing is changed.
    #[error(
        "the PostgreSQL database `{}` holds tables that are not Satchel's ({tables}); refusing to change it: give Satchel an empty database or schema of its own",
        path.display()
    )]
    ForeignDatabase {
        /// The database, as shown to people (no password).
        path: PathBuf,
        /// Some of the tables found.
        tables: String,
    },
    /// `satchel db copy` was pointed at a target that already holds
    /// records. Produced by `copy`; nothing was written.
    #[error(
        "`{}` already holds records; copy into a new file or an empty database",
        path.display()
    )]
    TargetNotEmpty {
        /// The target.
        path: PathBuf,
    },
    /// The database was made by a newer Satchel. Produced by `open`; not
    /// retryable: upgrade Satchel. The file is not changed.
    #[error(
        "`{}` was made by a newer Satchel: schema version {found}, this build knows up to {known}; upgrade Satchel to use it",
        path.display()
    )]
    NewerSchema {
        /// The database file.
        path: PathBuf,
        /// The schema version found in the file.
        found: u32,
        /// The newest schema version this build knows.
        known: u32,
    },
    /// The database has an older schema and was opened read-only, so it
    /// cannot be upgraded. Produced by a read-only `open`; open it once
    /// read-write to upgrade.
    #[error(
        "`{}` has schema version {found} and this build needs {known}; open it once with write access to upgrade it",
        path.display()
    )]
    NeedsUpgrade {
        /// The database file.
        path: PathBuf,
        /// The schema version found in the file.
        found: u32,
        /// The schema version this build needs.
        known: u32,
    },
    /// A migration recorded in the file differs from the one this build
    /// carries under the same version (a database from a diverging build).
    /// Produced by `open`; not retryable.
    #[error(
        "`{}`: schema version {version} was applied as `{found}` but this build calls it `{expected}`; the database comes from a different build of Satchel",
        path.display()
    )]
    SchemaMismatch {
        /// The database file.
        path: PathBuf,
        /// The version that differs.
        version: u32,
        /// The migration name recorded in the file.
        found: String,
        /// The migration name this build has.
        expected: String,
    },
    /// The file, its directory or its file system is read-only, or the
    /// store was opened read-only. Produced by `open` and by writes; not
    /// retryable until permissions change.
    #[error(
        "cannot write to `{}`: the database, its directory or its file system is read-only",
        path.display()
    )]
    ReadOnly {
        /// The database file.
        path: PathBuf,
    },
    /// The disk is full, a quota or file-size limit was hit, or the database
    /// reached its configured maximum size. Produced by writes; retryable once space
    /// is freed. The failed transaction left nothing behind.
    #[error(
        "cannot write to `{}`: the disk is full or the database reached its size limit",
        path.display()
    )]
    Full {
        /// The database file.
        path: PathBuf,
    },
    /// Another process held the database locked for longer than the busy
    /// timeout. Retryable.
    #[error(
        "the database `{}` stayed locked by another process past the busy timeout",
        path.display()
    )]
    Busy {
        /// The database file.
        path: PathBuf,
    },
    /// A record named by id does not exist. Produced by updates and by
    /// writes that name a conversation; not retryable.
    #[error("no {kind} with id `{id}`")]
    NotFound {
        /// What was looked for: `conversation`, `statement`...
        kind: &'static str,
        /// The id given.
        id: String,
    },
    /// A write refers to a row that does not exist (a statement, a parent
    /// log entry). Not retryable.
    #[error("a record refers to a row that does not exist: {reason}")]
    MissingReference {
        /// Which reference failed, as far as the backend can tell.
        reason: String,
    },
    /// The conversation already has a goal; goals are set once.
    #[error("conversation `{id}` already has a goal; a goal is set once")]
    GoalAlreadySet {
        /// The conversation's id.
        id: String,
    },
    /// The store was closed, or its writer stopped; no further operations
    /// are possible on this handle. Not retryable.
    #[error("the store is closed")]
    Closed,
    /// An operating-system error on a path the store manages (creating the
    /// database directory). Retryability depends on the cause.
    #[error("cannot prepare the database location `{}`: {source}", path.display())]
    Io {
        /// The path concerned.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// Any other database failure (an I/O error inside the database engine,
    /// a stored value that cannot be decoded). Retryability unknown.
    #[error("database error on `{}`: {source}", path.display())]
    Database {
        /// The database file.
        path: PathBuf,
        /// The backend's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}
