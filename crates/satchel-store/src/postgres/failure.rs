//! How PostgreSQL's failures become [`StoreError`]s: the one place that
//! knows its SQLSTATE codes.

use std::path::Path;

use tokio_postgres::error::SqlState;

use crate::StoreError;

/// A failure inside a transaction or a read, before the location is attached.
#[derive(Debug)]
pub(crate) enum PgFailure {
    /// The server or the connection said no.
    Pg(tokio_postgres::Error),
    /// A value could not be encoded or decoded as JSON.
    Json(serde_json::Error),
    /// A failure already in the store's terms.
    Store(StoreError),
}

impl From<tokio_postgres::Error> for PgFailure {
    fn from(error: tokio_postgres::Error) -> PgFailure {
        PgFailure::Pg(error)
    }
}

impl From<serde_json::Error> for PgFailure {
    fn from(error: serde_json::Error) -> PgFailure {
        PgFailure::Json(error)
    }
}

impl From<StoreError> for PgFailure {
    fn from(error: StoreError) -> PgFailure {
        PgFailure::Store(error)
    }
}

impl PgFailure {
    /// The failure in the store's terms, naming `path` (the location).
    pub(crate) fn into_store_error(self, path: &Path) -> StoreError {
        match self {
            PgFailure::Pg(error) => classify(error, path),
            PgFailure::Json(error) => StoreError::Database {
                path: path.to_path_buf(),
                source: Box::new(error),
            },
            PgFailure::Store(error) => error,
        }
    }
}

/// Maps a PostgreSQL error on the database at `path` to a [`StoreError`].
pub(crate) fn classify(error: tokio_postgres::Error, path: &Path) -> StoreError {
    let path = path.to_path_buf();
    let Some(code) = error.code() else {
        return StoreError::Database {
            path,
            source: Box::new(error),
        };
    };
    if *code == SqlState::FOREIGN_KEY_VIOLATION {
        StoreError::MissingReference {
            reason: "a statement, parent entry or tool-call id names no stored row".into(),
        }
    } else if *code == SqlState::READ_ONLY_SQL_TRANSACTION
        || *code == SqlState::INSUFFICIENT_PRIVILEGE
    {
        StoreError::ReadOnly { path }
    } else if *code == SqlState::DISK_FULL
        || *code == SqlState::PROGRAM_LIMIT_EXCEEDED
        || *code == SqlState::OUT_OF_MEMORY
    {
        StoreError::Full { path }
    } else if *code == SqlState::T_R_DEADLOCK_DETECTED
        || *code == SqlState::T_R_SERIALIZATION_FAILURE
        || *code == SqlState::LOCK_NOT_AVAILABLE
        || *code == SqlState::TOO_MANY_CONNECTIONS
    {
        StoreError::Busy { path }
    } else {
        StoreError::Database {
            path,
            source: Box::new(error),
        }
    }
}

/// An error and its causes on one line (tokio-postgres keeps the useful
/// part, such as "connection refused", in the source).
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let line = cause.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        source = cause.source();
    }
    text
}
