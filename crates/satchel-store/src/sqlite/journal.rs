//! [`StartJournal`]: a call's start put on record by one `write(2)` on the
//! caller's own thread, before the call runs, and folded into
//! `call_starts` by the writer with the next group it commits.
//!
//! Before it, every call's start was a transaction of its own, committed by
//! the writer thread while the call waited: two thread switches and a
//! commit before any tool ran, for a row that usually lived a few
//! milliseconds. A line appended to a file in the page cache survives the
//! process being killed exactly as a commit under `synchronous=NORMAL`
//! does (neither survives a power cut before the kernel writes it back).
//!
//! The journal of one store handle is a directory beside the database
//! (`<db>-calls/`) holding `<owner>.lock`, locked (`flock`) for the
//! handle's life, and one file per generation, `<owner>.<generation>`.
//! The writer closes a generation (starts go to the next file), inserts
//! its starts, records the generation in `call_journals` in the same
//! transaction, and only then removes the file: a process killed between
//! the commit and the removal leaves a file its record says is folded.
//! Opening a store folds the journals whose lock nobody holds (their
//! process is gone): every start there whose generation is not on record
//! becomes an unfinished call, as a start committed and never ended is.
//!
//! A fold that fails for want of room or access (a full disk or database,
//! a read-only or locked file) makes the journal refuse later starts until
//! a fold succeeds ([`StartJournal::refusal`]): a call must not run while
//! its record cannot be written, as before the journal, when its start's
//! own transaction failed.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use rusqlite::{OptionalExtension, Transaction, params};
use serde::{Deserialize, Serialize};
use uuid::{ContextV7, Uuid};

use crate::records::NewCallStart;
use crate::sqlite::failure::{Failure, resembling};
use crate::{StoreError, Timestamp};

/// One start, one line of a generation's file.
#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    id: String,
    source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    caller: Option<String>,
    tool: String,
    call_id: String,
    /// The input as JSON text, as `call_starts.input` holds it.
    input: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    conversation_id: Option<String>,
    started_at: i64,
}

/// The starts of one store handle not yet in `call_starts`. Its files are
/// made with the first start (a handle that only reads makes none).
pub(crate) struct StartJournal {
    /// The database's file.
    db: PathBuf,
    dir: PathBuf,
    owner: String,
    state: Mutex<State>,
    /// Why the last fold failed, until one succeeds.
    refused: Mutex<Option<StoreError>>,
}

struct State {
    /// The lock and the current generation's file, once a start came.
    open: Option<Open>,
    /// The generation starts are appended to.
    generation: u64,
    /// Starts appended to it.
    entries: usize,
    /// Ids of starts: UUIDv7, increasing.
    ids: ContextV7,
}

struct Open {
    /// Locked for the handle's life: a journal whose lock can be taken
    /// belongs to a process that is gone.
    _lock: File,
    file: File,
}

impl StartJournal {
    /// This handle's journal beside the database at `db` (nothing is made
    /// until the first start).
    pub(crate) fn new(db: &Path) -> StartJournal {
        StartJournal {
            db: db.to_path_buf(),
            dir: journal_dir(db),
            owner: Uuid::now_v7().simple().to_string(),
            state: Mutex::new(State {
                open: None,
                generation: 1,
                entries: 0,
                ids: ContextV7::new(),
            }),
            refused: Mutex::new(None),
        }
    }

    /// Notes how a fold ended. Called as the fold's job is settled, before
    /// any later write of its group is answered, so a start that retried
    /// the fold sees how it went.
    pub(crate) fn note_fold(&self, outcome: &Result<(), StoreError>) {
        *self.refused.lock().unwrap_or_else(PoisonError::into_inner) = outcome
            .as_ref()
            .err()
            .map(|error| resembling(error, &self.db));
    }

    /// Whether the last fold failed.
    pub(crate) fn refusing(&self) -> bool {
        self.refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// The error a start is refused with while folds fail.
    pub(crate) fn refusal(&self) -> Option<StoreError> {
        let refused = self.refused.lock().unwrap_or_else(PoisonError::into_inner);
        refused.as_ref().map(|error| resembling(error, &self.db))
    }

    /// Puts `start` on record; returns its id. A start that could not be
    /// written in full is an error: the call must not run.
    pub(crate) fn append(
        &self,
        start: &NewCallStart,
        now: Timestamp,
    ) -> Result<String, StoreError> {
        let mut state = self.state();
        let millis = u64::try_from(now.as_millis()).unwrap_or(0);
        let nanos = u32::try_from(millis % 1000).unwrap_or(0) * 1_000_000;
        let timestamp = uuid::Timestamp::from_unix(&state.ids, millis / 1000, nanos);
        let id = Uuid::new_v7(timestamp).to_string();
        let entry = Entry {
            id: id.clone(),
            source: start.source.as_str().to_owned(),
            caller: start.caller.clone(),
            tool: start.call.name.clone(),
            call_id: start.call.id.clone(),
            input: serde_json::to_string(&start.call.input)
                .map_err(|error| self.io_error(std::io::Error::other(error)))?,
            conversation_id: start.conversation_id.clone(),
            started_at: start.started_at.as_millis(),
        };
        let mut line = serde_json::to_vec(&entry)
            .map_err(|error| self.io_error(std::io::Error::other(error)))?;
        line.push(b'\n');
        let generation = state.generation;
        let file = match &mut state.open {
            Some(open) => &mut open.file,
            None => &mut state.open.insert(self.open(generation)?).file,
        };
        // One write: the file is opened to append, so a line is never
        // interleaved with another, and a line cut short (a full disk) is
        // an error here and skipped when folded.
        let full = Some(rustix::io::Errno::NOSPC.raw_os_error());
        match file.write(&line) {
            Ok(written) if written == line.len() => {
                state.entries += 1;
                Ok(id)
            }
            Ok(_) => Err(StoreError::Full {
                path: self.file_path(generation),
            }),
            Err(error) if error.raw_os_error() == full => Err(StoreError::Full {
                path: self.file_path(generation),
            }),
            Err(source) => Err(StoreError::Io {
                path: self.file_path(generation),
                source,
            }),
        }
    }

    /// Closes the current generation, when it holds starts, and returns
    /// it: later starts go to the next one's file.
    pub(crate) fn close_generation(&self) -> Result<Option<u64>, StoreError> {
        let mut state = self.state();
        if state.entries == 0 {
            return Ok(None);
        }
        let next = state.generation + 1;
        let path = self.file_path(next);
        let file = open_new(&path).map_err(|source| StoreError::Io { path, source })?;
        let closed = state.generation;
        state.generation = next;
        if let Some(open) = &mut state.open {
            open.file = file;
        }
        state.entries = 0;
        Ok(Some(closed))
    }

    /// Makes the directory, takes the lock, opens `generation`'s file.
    fn open(&self, generation: u64) -> Result<Open, StoreError> {
        let made = || -> std::io::Result<Open> {
            match DirBuilder::new().mode(0o700).create(&self.dir) {
                Ok(()) => {}
                Err(error) if error.kind() == ErrorKind::AlreadyExists => {}
                Err(error) => return Err(error),
            }
            let lock = open_new(&self.dir.join(format!("{}.lock", self.owner)))?;
            rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive)?;
            let file = open_new(&self.file_path(generation))?;
            Ok(Open { _lock: lock, file })
        };
        // Another handle closing may remove the directory, once empty,
        // between the two steps: then it is made again.
        match made() {
            Err(error) if error.kind() == ErrorKind::NotFound => made(),
            other => other,
        }
        .map_err(|error| self.io_error(error))
    }

    fn io_error(&self, source: std::io::Error) -> StoreError {
        StoreError::Io {
            path: self.dir.clone(),
            source,
        }
    }

    /// Inserts the starts of closed generation `generation` and records it
    /// as folded, in `tx`; its file goes once that commits ([`Self::forget`]).
    pub(crate) fn fold(&self, tx: &Transaction<'_>, generation: u64) -> Result<(), Failure> {
        fold_file(tx, &self.file_path(generation))?;
        record_folded(tx, &self.owner, generation)
    }

    /// Removes a folded generation's file.
    pub(crate) fn forget(&self, generation: u64) {
        let _ = std::fs::remove_file(self.file_path(generation));
    }

    /// Removes this handle's journal once everything in it is folded.
    pub(crate) fn remove(&self) {
        let state = self.state();
        if state.open.is_some() && state.entries == 0 {
            let _ = std::fs::remove_file(self.file_path(state.generation));
            let _ = std::fs::remove_file(self.dir.join(format!("{}.lock", self.owner)));
            // Only once empty: other handles' journals live there too.
            let _ = std::fs::remove_dir(&self.dir);
        }
    }

    fn file_path(&self, generation: u64) -> PathBuf {
        self.dir.join(format!("{}.{generation}", self.owner))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl std::fmt::Debug for StartJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartJournal")
            .field("dir", &self.dir)
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

/// The journal directory of the database at `db`.
fn journal_dir(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push("-calls");
    db.with_file_name(name)
}

/// A new file, private, opened to append.
fn open_new(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

/// Inserts every whole start in the file at `path` not already in
/// `call_starts` (a fold again after a crash adds nothing twice).
fn fold_file(tx: &Transaction<'_>, path: &Path) -> Result<(), Failure> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(io_failure(path, source)),
    };
    let mut insert = tx.prepare_cached(
        "INSERT OR IGNORE INTO call_starts (id, source, tool, call_id, input, conversation_id, started_at, caller)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    for line in BufReader::new(file).split(b'\n') {
        let line = line.map_err(|source| io_failure(path, source))?;
        // A line cut short by a full disk was refused to its caller.
        let Ok(entry) = serde_json::from_slice::<Entry>(&line) else {
            continue;
        };
        insert.execute(params![
            entry.id,
            entry.source,
            entry.tool,
            entry.call_id,
            entry.input,
            entry.conversation_id,
            entry.started_at,
            entry.caller,
        ])?;
    }
    Ok(())
}

/// A file of the journal that could not be read.
fn io_failure(path: &Path, source: std::io::Error) -> Failure {
    Failure::Store(StoreError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Records that `owner`'s generations up to `generation` are folded.
fn record_folded(tx: &Transaction<'_>, owner: &str, generation: u64) -> Result<(), Failure> {
    tx.prepare_cached(
        "INSERT INTO call_journals (owner, folded) VALUES (?1, ?2)
         ON CONFLICT (owner) DO UPDATE SET folded = excluded.folded",
    )?
    .execute(params![
        owner,
        i64::try_from(generation).unwrap_or(i64::MAX)
    ])?;
    Ok(())
}

/// Folds the journals beside the database at `db` whose process is gone,
/// in `tx`; returns the files to remove once it commits (their lock files
/// last, so a crash before leaves them to fold again, adding nothing).
pub(crate) fn recover(tx: &Transaction<'_>, db: &Path) -> Result<Vec<PathBuf>, Failure> {
    let dir = journal_dir(db);
    let listing = match std::fs::read_dir(&dir) {
        Ok(listing) => listing,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(io_failure(&dir, source)),
    };
    let mut owners: Vec<String> = Vec::new();
    let mut files: Vec<(String, u64, PathBuf)> = Vec::new();
    for entry in listing.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((owner, suffix)) = name.split_once('.') else {
            continue;
        };
        match suffix {
            "lock" => owners.push(owner.to_owned()),
            generation => {
                if let Ok(generation) = generation.parse::<u64>() {
                    files.push((owner.to_owned(), generation, entry.path()));
                }
            }
        }
    }
    let mut done = Vec::new();
    for owner in &owners {
        let lock_path = dir.join(format!("{owner}.lock"));
        let Ok(lock) = File::open(&lock_path) else {
            continue;
        };
        // Held: its process is alive (or recovering it right now).
        if rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err() {
            continue;
        }
        let folded: u64 = tx
            .prepare_cached("SELECT folded FROM call_journals WHERE owner = ?1")?
            .query_row(params![owner], |row| row.get::<_, i64>(0))
            .optional()?
            .and_then(|folded| u64::try_from(folded).ok())
            .unwrap_or(0);
        let mut mine: Vec<&(String, u64, PathBuf)> =
            files.iter().filter(|(of, _, _)| of == owner).collect();
        mine.sort_by_key(|(_, generation, _)| *generation);
        let mut last = folded;
        for (_, generation, path) in mine {
            if *generation > folded {
                fold_file(tx, path)?;
            }
            last = last.max(*generation);
            done.push(path.clone());
        }
        // Kept until the files are gone: a crash before that folds them
        // again, and this says they are.
        record_folded(tx, owner, last)?;
        done.push(lock_path);
    }
    // The records of journals gone whole (a journal's lock file is made
    // before its first record and removed after its last file).
    let known: Vec<String> = tx
        .prepare_cached("SELECT owner FROM call_journals")?
        .query_map([], |row| row.get::<_, String>(0))?
        .collect::<Result<_, _>>()?;
    let mut forget = tx.prepare_cached("DELETE FROM call_journals WHERE owner = ?1")?;
    for owner in known.iter().filter(|owner| !owners.contains(owner)) {
        forget.execute(params![owner])?;
    }
    Ok(done)
}
