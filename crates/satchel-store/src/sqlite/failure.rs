//! How SQLite's failures become [`StoreError`]s: the one place that knows
//! SQLite's result codes.

use std::path::Path;

use rusqlite::{Connection, ffi};

use crate::StoreError;

/// A failure inside a transaction or a read, before the path is attached.
#[derive(Debug)]
pub(crate) enum Failure {
    /// SQLite said no.
    Sql(rusqlite::Error),
    /// A value could not be encoded as JSON.
    Json(serde_json::Error),
    /// A failure already in the store's terms.
    Store(StoreError),
}

impl From<rusqlite::Error> for Failure {
    fn from(error: rusqlite::Error) -> Failure {
        Failure::Sql(error)
    }
}

impl From<serde_json::Error> for Failure {
    fn from(error: serde_json::Error) -> Failure {
        Failure::Json(error)
    }
}

impl From<StoreError> for Failure {
    fn from(error: StoreError) -> Failure {
        Failure::Store(error)
    }
}

impl Failure {
    /// The failure in the store's terms, naming `path`.
    pub(crate) fn into_store_error(self, path: &Path) -> StoreError {
        match self {
            Failure::Sql(error) => classify(error, path),
            Failure::Json(error) => StoreError::Database {
                path: path.to_path_buf(),
                source: Box::new(error),
            },
            Failure::Store(error) => error,
        }
    }
}

/// Maps an SQLite error on the database at `path` to a [`StoreError`].
pub(crate) fn classify(error: rusqlite::Error, path: &Path) -> StoreError {
    let path = path.to_path_buf();
    let extended = match &error {
        rusqlite::Error::SqliteFailure(failure, _) => failure.extended_code,
        _ => 0,
    };
    match error.sqlite_error_code() {
        Some(ffi::ErrorCode::NotADatabase | ffi::ErrorCode::DatabaseCorrupt) => {
            StoreError::Corrupt {
                path,
                reason: error.to_string(),
            }
        }
        Some(ffi::ErrorCode::ReadOnly) => StoreError::ReadOnly { path },
        Some(ffi::ErrorCode::DiskFull) => StoreError::Full { path },
        Some(ffi::ErrorCode::DatabaseBusy | ffi::ErrorCode::DatabaseLocked) => {
            StoreError::Busy { path }
        }
        Some(ffi::ErrorCode::CannotOpen) => StoreError::CannotOpen {
            path,
            reason: error.to_string(),
        },
        Some(ffi::ErrorCode::ConstraintViolation)
            if extended == ffi::SQLITE_CONSTRAINT_FOREIGNKEY =>
        {
            StoreError::MissingReference {
                reason: "a statement, parent entry or tool-call id names no stored row".into(),
            }
        }
        _ => StoreError::Database {
            path,
            source: Box::new(error),
        },
    }
}

/// Like [`classify`], but an I/O error whose cause was a full disk, a quota
/// or a file-size limit (`EFBIG` makes SQLite report a generic write error)
/// becomes [`StoreError::Full`].
pub(crate) fn classify_on(conn: &Connection, error: rusqlite::Error, path: &Path) -> StoreError {
    if error.sqlite_error_code() == Some(rusqlite::ErrorCode::SystemIoFailure) {
        // SAFETY: `conn` is open, so its handle is valid; sqlite3_system_errno
        // only reads the error number the VFS saved on that handle.
        let errno = unsafe { rusqlite::ffi::sqlite3_system_errno(conn.handle()) };
        let no_space = [
            rustix::io::Errno::NOSPC,
            rustix::io::Errno::FBIG,
            rustix::io::Errno::DQUOT,
        ];
        if no_space.iter().any(|code| code.raw_os_error() == errno) {
            return StoreError::Full {
                path: path.to_path_buf(),
            };
        }
    }
    classify(error, path)
}

/// `error` again, for another write it ended or a later caller (a store
/// error is not `Clone`): its kind when the caller can act on it (a full,
/// read-only or locked database), else its message.
pub(crate) fn resembling(error: &StoreError, path: &Path) -> StoreError {
    let path = path.to_path_buf();
    match error {
        StoreError::Full { .. } => StoreError::Full { path },
        StoreError::ReadOnly { .. } => StoreError::ReadOnly { path },
        StoreError::Busy { .. } => StoreError::Busy { path },
        other => StoreError::Database {
            path,
            source: Box::new(std::io::Error::other(other.to_string())),
        },
    }
}

/// A decoding failure of column `index`, in rusqlite's terms.
pub(crate) fn column_error(
    index: usize,
    error: impl std::error::Error + Send + Sync + 'static,
) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, Box::new(error))
}
