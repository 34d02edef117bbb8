//! Processes that outlive the call that started them: dev servers, long
//! builds, interactive programs.
//!
//! A [`ProcessTable`] holds them by owner (a conversation, an MCP
//! session): each is started like a foreground run (own session,
//! parent-death signal, the same sandbox and environment), with stdout and
//! stderr on one pipe or a pseudo-terminal, and stdin held by Satchel.
//! Reads take only what is new, head and tail within a limit; the whole
//! output goes to a spill file capped on disk. An owner's processes end
//! with it ([`ProcessTable::end_owner`]), every process with the table's
//! user ([`ProcessTable::end_all`]), and those a killed Satchel left are
//! ended by the next one ([`sweep_orphans`], from the records written to
//! the table's record directory).
//!
//! What does not live here: tools, JSON, the model's wording.

mod forward;
mod log;
mod process;
mod record;
mod spawn;
mod tree;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

pub use forward::Forwarded;
pub use log::{SpillState, Unread};
pub use process::{BackgroundProcess, ProcessInfo, ProcessState, Reading};
pub use record::sweep_orphans;

use crate::{ExecError, ExecRequest, RunnerConfig};

/// Ended processes kept per owner for a last read; older ones are dropped.
const KEEP_ENDED: usize = 16;

/// Why a background process did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The owner already has the most live processes allowed; not
    /// retryable until one ends.
    #[error("{limit} background processes are already running (the limit, exec.maxBackground)")]
    TooMany {
        /// The limit.
        limit: usize,
        /// The live ones.
        live: Vec<ProcessInfo>,
    },
    /// The process could not be started.
    #[error(transparent)]
    Exec(#[from] ExecError),
}

/// An owner's loopback network, or why it could not be made.
type Loopback = Result<Arc<crate::sandbox::LoopbackNet>, String>;

struct Entry {
    owner: String,
    process: Arc<BackgroundProcess>,
}

/// Every background process of one Satchel, by owner.
#[derive(Default)]
pub struct ProcessTable {
    entries: Mutex<Vec<Entry>>,
    nets: Mutex<HashMap<String, Loopback>>,
    forwards: Mutex<forward::Forwards>,
    next: AtomicU64,
    record_dir: Option<PathBuf>,
    /// Set by [`ProcessTable::loopback_on_demand`].
    loopback_on_demand: AtomicBool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ProcessTable {
    /// A table that records its processes under `record_dir` (for the
    /// next Satchel's [`sweep_orphans`]) when given.
    pub fn new(record_dir: Option<PathBuf>) -> ProcessTable {
        ProcessTable {
            record_dir,
            ..ProcessTable::default()
        }
    }

    /// Where processes are recorded.
    pub fn record_dir(&self) -> Option<&PathBuf> {
        self.record_dir.as_ref()
    }

    /// Starts `request` in the background for `owner` (its timeout is
    /// ignored: it runs until it ends or is killed); `command` is how it
    /// is listed.
    pub fn start(
        &self,
        owner: &str,
        command: &str,
        request: &ExecRequest,
        tty: bool,
        config: &RunnerConfig,
    ) -> Result<Arc<BackgroundProcess>, StartError> {
        if !request.working_dir.is_dir() {
            return Err(ExecError::MissingWorkingDir {
                path: request.working_dir.clone(),
            }
            .into());
        }
        let live = self.list(owner);
        let live: Vec<ProcessInfo> = live.into_iter().filter(|p| p.state.is_running()).collect();
        if live.len() >= config.max_background {
            return Err(StartError::TooMany {
                limit: config.max_background,
                live,
            });
        }
        let id = format!("p{}", self.next.fetch_add(1, Ordering::Relaxed) + 1);
        // Unique in this Satchel (tables are many in tests), and ended
        // by a dot so that no marker is the prefix of another.
        static SEQUENCE: AtomicU64 = AtomicU64::new(0);
        let marker = format!(
            "{}{}.",
            tree::owner_prefix(),
            SEQUENCE.fetch_add(1, Ordering::Relaxed)
        );
        let mut request = request.clone();
        request
            .env
            .push((tree::MARKER.into(), marker.clone().into()));
        // Output as it is printed, not when a buffer fills.
        request.env.push(("PYTHONUNBUFFERED".into(), "1".into()));
        let spawned = spawn::spawn(&request, tty)?;
        let log = log::OutputLog::new(
            config.stdout.limit_bytes,
            config.spill.clone(),
            &config.redactor,
        );
        let process = BackgroundProcess::start(process::Parts {
            id,
            command: command.to_owned(),
            tty,
            spawned,
            log,
            kill_grace: config.kill_grace,
            record_dir: self.record_dir.clone(),
            marker,
        })
        .ok_or_else(|| {
            StartError::Exec(ExecError::Wait(std::io::Error::other(
                "the process exited before its pid was read",
            )))
        })?;
        let mut entries = lock(&self.entries);
        entries.push(Entry {
            owner: owner.to_owned(),
            process: process.clone(),
        });
        prune(&mut entries, owner);
        Ok(process)
    }

    /// The process `id` of `owner`.
    pub fn get(&self, owner: &str, id: &str) -> Option<Arc<BackgroundProcess>> {
        lock(&self.entries)
            .iter()
            .find(|e| e.owner == owner && e.process.id() == id)
            .map(|e| e.process.clone())
    }

    /// The loopback-only network namespace `owner`'s sandboxed commands
    /// share (made on first use, ended with the owner); `None` where the
    /// system cannot make one (they then have no network).
    pub fn loopback(&self, owner: &str) -> Option<Arc<crate::sandbox::LoopbackNet>> {
        let mut nets = lock(&self.nets);
        let net = nets.entry(owner.to_owned()).or_insert_with(|| {
            crate::sandbox::LoopbackNet::new()
                .map(Arc::new)
                .inspect_err(|reason| {
                    tracing::warn!("{reason}; sandboxed commands have no network")
                })
        });
        net.as_ref().ok().cloned()
    }

    /// From now on an owner's shared loopback is made only when its first
    /// background process starts; a foreground command before that gets
    /// a loopback of its own. For a host that runs one call and exits
    /// (`satchel tools call`): no later command could reach what that call
    /// leaves, and making the shared namespace costs a helper process.
    pub fn loopback_on_demand(&self) {
        self.loopback_on_demand.store(true, Ordering::Relaxed);
    }

    /// The loopback a sandboxed command of `owner` without network gets:
    /// the owner's shared one, made for a `background` process or unless
    /// [`loopback_on_demand`](Self::loopback_on_demand) was asked for;
    /// otherwise the shared one if it exists, or one of the command's own.
    pub fn loopback_for(&self, owner: &str, background: bool) -> crate::sandbox::Loopback {
        use crate::sandbox::Loopback;
        if background || !self.loopback_on_demand.load(Ordering::Relaxed) {
            return self
                .loopback(owner)
                .map_or(Loopback::None, Loopback::Shared);
        }
        match lock(&self.nets).get(owner) {
            Some(Ok(net)) => Loopback::Shared(net.clone()),
            Some(Err(_)) => Loopback::None,
            None => Loopback::Own,
        }
    }

    /// Forwards `ports` of `owner`'s loopback namespace to the machine's
    /// loopback (`exec.forwardPorts`), those not forwarded yet; what
    /// changed, to tell the model. Nothing when `owner` has no namespace
    /// (its commands use the machine's own network). Needs a Tokio runtime.
    pub fn forward(&self, owner: &str, ports: &[u16]) -> Vec<Forwarded> {
        if ports.is_empty() {
            return Vec::new();
        }
        let Some(Ok(net)) = lock(&self.nets).get(owner).cloned() else {
            return Vec::new();
        };
        lock(&self.forwards).open(owner, &net, ports)
    }

    /// The process `id` whoever owns it (the REPL's `/kill`, for its user).
    pub fn find(&self, id: &str) -> Option<Arc<BackgroundProcess>> {
        lock(&self.entries)
            .iter()
            .find(|e| e.process.id() == id)
            .map(|e| e.process.clone())
    }

    /// The processes of `owner`, oldest first.
    pub fn list(&self, owner: &str) -> Vec<ProcessInfo> {
        lock(&self.entries)
            .iter()
            .filter(|e| e.owner == owner)
            .map(|e| e.process.info())
            .collect()
    }

    /// Every process with its owner, oldest first (the REPL's `/ps`, the
    /// web view).
    pub fn list_all(&self) -> Vec<(String, ProcessInfo)> {
        lock(&self.entries)
            .iter()
            .map(|e| (e.owner.clone(), e.process.info()))
            .collect()
    }

    /// The processes of `owner` that ended since the model was last told,
    /// each returned once.
    pub fn take_ended(&self, owner: &str) -> Vec<ProcessInfo> {
        lock(&self.entries)
            .iter()
            .filter(|e| e.owner == owner && e.process.tell_end())
            .map(|e| e.process.info())
            .collect()
    }

    /// Ends every process of `owner` (a conversation or session that
    /// ended) and forgets them. They stay in the table until they are dead,
    /// so an [`end_all`](Self::end_all) that comes meanwhile (Satchel
    /// exiting while this runs in a task the runtime drops) still kills
    /// the ones that outlast their TERM.
    pub async fn end_owner(&self, owner: &str) {
        let processes: Vec<Arc<BackgroundProcess>> = lock(&self.entries)
            .iter()
            .filter(|e| e.owner == owner)
            .map(|e| e.process.clone())
            .collect();
        lock(&self.forwards).close_owner(owner);
        lock(&self.nets).remove(owner);
        end(&processes).await;
        lock(&self.entries).retain(|e| !processes.iter().any(|p| Arc::ptr_eq(p, &e.process)));
    }

    /// Ends every process in the table (Satchel is exiting).
    pub async fn end_all(&self) {
        let processes: Vec<Arc<BackgroundProcess>> = lock(&self.entries)
            .iter()
            .map(|e| e.process.clone())
            .collect();
        lock(&self.forwards).close_all();
        end(&processes).await;
        lock(&self.entries).clear();
    }
}

/// Kills processes concurrently: the slowest grace period, not their sum.
async fn end(processes: &[Arc<BackgroundProcess>]) {
    let kills: Vec<_> = processes
        .iter()
        .cloned()
        .map(|process| tokio::spawn(async move { process.kill().await }))
        .collect();
    for kill in kills {
        let _ = kill.await;
    }
}

/// Drops the oldest ended processes of `owner` beyond [`KEEP_ENDED`].
fn prune(entries: &mut Vec<Entry>, owner: &str) {
    let ended: Vec<usize> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.owner == owner && !e.process.state().is_running())
        .map(|(i, _)| i)
        .collect();
    let excess = ended.len().saturating_sub(KEEP_ENDED);
    for &index in ended[..excess].iter().rev() {
        entries.remove(index);
    }
}
