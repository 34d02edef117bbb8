//! [`PgStore`]: the PostgreSQL backend, for several Satchel processes (on
//! one machine or many) sharing one record, one audit trail and one memory.
//!
//! Connections come from a `deadpool-postgres` pool; every write is one
//! transaction on a pooled connection, and `Ok` means committed. Opening
//! applies the embedded migrations (`schema`) under an advisory lock, so
//! processes starting together migrate once. Ids are UUIDv7 made by the
//! writing process (random bits keep processes apart; the primary keys
//! would refuse a repeat); memory keys come from an identity column.
//!
//! Memory revisions: each process keeps its recall index in memory, and
//! learns of other processes' memory writes through `LISTEN
//! satchel_memory` (a trigger notifies on every revision), so
//! [`MemoryStore::memory_revision`](crate::MemoryStore::memory_revision)
//! answers from the last notification without a round trip while the
//! listening connection is up, and from the server otherwise.
//!
//! What does not live here: reading the environment (the caller passes
//! the `PG*` variables in, see [`PgLocation::parse`]), SQLite.

mod call_repo;
mod code_repo;
mod copy_rows;
mod failure;
mod front_repo;
mod memory;
mod records_repo;
mod repo;
mod rows;
mod schema;
pub(crate) mod search;
mod tls;
mod usage_repo;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use deadpool_postgres::Transaction;
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};
use futures_util::StreamExt;
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::{AsyncMessage, Config, IsolationLevel};
use tokio_postgres_rustls::MakeRustlsConnect;
use uuid::{ContextV7, Uuid};

use crate::postgres::failure::PgFailure;
use crate::{Access, StoreError, StoreOptions, Timestamp};

pub use schema::PG_SCHEMA_VERSION;

/// The channel memory revisions are announced on.
const MEMORY_CHANNEL: &str = "satchel_memory";

/// Where a PostgreSQL database is and how to reach it: a `postgres://` URL
/// completed by the standard `PG*` variables the caller passes in.
///
/// Its `Display` and [`PgLocation::display`] never show the password.
#[derive(Clone)]
pub struct PgLocation {
    config: Config,
    display: String,
    /// `sslmode=verify-ca` or `verify-full`: check the server's
    /// certificate (see `tls.rs`).
    verify: bool,
}

impl std::fmt::Debug for PgLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PgLocation").field(&self.display).finish()
    }
}

impl std::fmt::Display for PgLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.display)
    }
}

impl PgLocation {
    /// Parses a `postgres://` or `postgresql://` URL (or libpq's
    /// `key=value` form); what it leaves out is taken from `env`'s
    /// `PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`, `PGDATABASE`,
    /// `PGSSLMODE`, `PGAPPNAME` and `PGCONNECT_TIMEOUT` (then `USER` for
    /// the user name), as libpq would. The store itself never reads the
    /// environment: the binary passes `std::env::vars()`, tests their own.
    pub fn parse(
        url: &str,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<PgLocation, StoreError> {
        let env: std::collections::HashMap<String, String> = env.into_iter().collect();
        // tokio-postgres reads `disable`, `prefer` and `require`; the
        // verifying modes are ours, asked for as libpq's are.
        let (url, verify_in_url) = without_verify_mode(url);
        let url = url.as_str();
        let mut config: Config = url.parse().map_err(|error| StoreError::CannotOpen {
            path: PathBuf::from("postgres://..."),
            reason: format!("not a PostgreSQL URL: {error}"),
        })?;
        let var = |name: &str| env.get(name).filter(|value| !value.is_empty());
        if config.get_hosts().is_empty() {
            let hosts = var("PGHOST").map_or("localhost", String::as_str);
            for host in hosts.split(',') {
                if host.starts_with('/') {
                    config.host_path(host);
                } else {
                    config.host(host);
                }
            }
        }
        if config.get_ports().is_empty()
            && let Some(port) = var("PGPORT").and_then(|port| port.parse::<u16>().ok())
        {
            config.port(port);
        }
        if config.get_user().is_none()
            && let Some(user) = var("PGUSER").or_else(|| var("USER"))
        {
            config.user(user);
        }
        if config.get_password().is_none()
            && let Some(password) = var("PGPASSWORD")
        {
            config.password(password);
        }
        if config.get_dbname().is_none()
            && let Some(dbname) = var("PGDATABASE")
        {
            config.dbname(dbname);
        }
        // `prefer` is also the parser's default: a URL that says nothing
        // lets PGSSLMODE decide.
        let mut verify = verify_in_url;
        if verify {
            config.ssl_mode(SslMode::Require);
        } else if config.get_ssl_mode() == SslMode::Prefer
            && !url.contains("sslmode")
            && let Some(mode) = var("PGSSLMODE")
        {
            match mode.as_str() {
                "disable" => {
                    config.ssl_mode(SslMode::Disable);
                }
                "require" => {
                    config.ssl_mode(SslMode::Require);
                }
                "verify-ca" | "verify-full" => {
                    config.ssl_mode(SslMode::Require);
                    verify = true;
                }
                _ => {}
            }
        }
        if config.get_application_name().is_none() {
            config.application_name(var("PGAPPNAME").map_or("satchel", String::as_str));
        }
        if config.get_connect_timeout().is_none() {
            let seconds = var("PGCONNECT_TIMEOUT")
                .and_then(|s| s.parse::<u64>().ok())
                .unwrap_or(10);
            config.connect_timeout(Duration::from_secs(seconds.max(1)));
        }
        let display = describe(&config);
        Ok(PgLocation {
            config,
            display,
            verify,
        })
    }

    /// The location without the password, for messages and logs.
    pub fn display(&self) -> &str {
        &self.display
    }

    /// The database name, if given.
    pub fn dbname(&self) -> Option<&str> {
        self.config.get_dbname()
    }

    /// The same server and credentials, another database.
    pub fn with_dbname(&self, dbname: &str) -> PgLocation {
        let mut config = self.config.clone();
        config.dbname(dbname);
        let display = describe(&config);
        PgLocation {
            config,
            display,
            verify: self.verify,
        }
    }
}

/// `postgres://user@host:port/db`, never with the password.
fn describe(config: &Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(name)) => name.clone(),
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config
        .get_user()
        .map(|user| format!("{user}@"))
        .unwrap_or_default();
    let db = config.get_dbname().unwrap_or_default();
    format!("postgres://{user}{host}:{port}/{db}")
}

/// Whether `text` names a PostgreSQL database rather than a file.
pub(crate) fn is_postgres_url(text: &str) -> bool {
    text.starts_with("postgres://") || text.starts_with("postgresql://")
}

/// The TLS connector (see `tls.rs`): used when the server offers TLS
/// (`sslmode=prefer`, the default) or the URL requires it.
fn tls(location: &PgLocation) -> Result<MakeRustlsConnect, StoreError> {
    tls::connector(location.display(), location.verify)
}

/// `url` without an `sslmode=verify-ca|verify-full` parameter, and whether
/// it had one.
fn without_verify_mode(url: &str) -> (String, bool) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), false);
    };
    let mut verify = false;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| {
            let asks = matches!(*pair, "sslmode=verify-ca" | "sslmode=verify-full");
            verify |= asks;
            !asks
        })
        .collect();
    if kept.is_empty() {
        (base.to_owned(), verify)
    } else {
        (format!("{base}?{}", kept.join("&")), verify)
    }
}

/// What the listening task shares with the store.
#[derive(Debug, Default)]
struct Revisions {
    /// The newest memory revision this process knows of.
    latest: AtomicI64,
    /// True while the listening connection is up (so `latest` is current).
    listening: AtomicBool,
    /// When the server was last asked: even while listening, `latest` is
    /// trusted for [`REVISION_TRUST`] at most, since a connection cut
    /// without a word (a network partition, a pooler that drops `LISTEN`)
    /// can look up for hours.
    asked_at: Mutex<Option<std::time::Instant>>,
}

/// How long notifications alone keep the memory revision current.
const REVISION_TRUST: Duration = Duration::from_secs(5);

/// The PostgreSQL store; cheap to clone, every clone shares one pool.
///
/// Must be used inside a Tokio runtime.
///
/// # Caveats
/// A write whose future is dropped before its `COMMIT` was sent is rolled
/// back by the server; one dropped after that may have committed. After
/// [`PgStore::close`], every operation fails with [`StoreError::Closed`].
#[derive(Clone)]
pub struct PgStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("location", &self.inner.location.display)
            .finish_non_exhaustive()
    }
}

struct Inner {
    pool: Pool,
    location: PgLocation,
    path: PathBuf,
    options: StoreOptions,
    ids: Mutex<ContextV7>,
    closed: AtomicBool,
    revisions: Arc<Revisions>,
    listener: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(task) = self
            .listener
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            task.abort();
        }
    }
}

/// The time of a write and its id generator.
pub(crate) struct Ctx<'a> {
    now: Timestamp,
    ids: &'a Mutex<ContextV7>,
}

impl Ctx<'_> {
    /// The time of this write, from the store's clock.
    pub(crate) fn now(&self) -> Timestamp {
        self.now
    }

    /// A new UUIDv7 id; ids made by one process increase strictly.
    pub(crate) fn new_id(&self) -> String {
        let millis = u64::try_from(self.now.as_millis()).unwrap_or(0);
        let nanos = u32::try_from(millis % 1000).unwrap_or(0) * 1_000_000;
        let ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        let timestamp = uuid::Timestamp::from_unix(&*ids, millis / 1000, nanos);
        Uuid::new_v7(timestamp).to_string()
    }
}

/// Runs `$body` (an expression that may use `?` on [`PgFailure`]s and
/// borrows `$tx`, the open transaction, and `$ctx`) as one transaction of
/// `$store`, committing when it succeeds.
macro_rules! transact {
    ($store:expr, |$tx:ident, $ctx:ident| $body:expr) => {{
        let store: &crate::postgres::PgStore = $store;
        let mut client = store.writer().await?;
        let $tx = client
            .transaction()
            .await
            .map_err(|error| store.error(error.into()))?;
        let $ctx = store.ctx();
        let result: Result<_, crate::postgres::failure::PgFailure> = async { $body }.await;
        match result {
            Ok(value) => {
                $tx.commit()
                    .await
                    .map_err(|error| store.error(error.into()))?;
                Ok(value)
            }
            Err(failure) => Err(store.error(failure)),
        }
    }};
}
pub(crate) use transact;

impl PgStore {
    /// Connects to the database at `location`, checks that it is Satchel's
    /// (or empty) and not newer than this build, and applies the missing
    /// migrations under an advisory lock.
    ///
    /// Only [`StoreOptions::access`], `redactor`, `clock` and
    /// `read_connections` (the pool holds that many plus four) apply;
    /// durability and size limits are the server's business.
    pub async fn open(location: &PgLocation, options: StoreOptions) -> Result<PgStore, StoreError> {
        let path = PathBuf::from(location.display());
        let manager = Manager::from_config(
            location.config.clone(),
            tls(location)?,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.read_connections.max(1) + 4)
            .build()
            .map_err(|error| StoreError::CannotOpen {
                path: path.clone(),
                reason: error.to_string(),
            })?;
        let store = PgStore {
            inner: Arc::new(Inner {
                pool,
                location: location.clone(),
                path,
                options,
                ids: Mutex::new(ContextV7::new()),
                closed: AtomicBool::new(false),
                revisions: Arc::new(Revisions::default()),
                listener: Mutex::new(None),
            }),
        };
        let mut client = store.connect().await?;
        let now = store.inner.options.clock.now().as_millis();
        match store.inner.options.access {
            Access::ReadWrite => schema::migrate(&mut client, &store.inner.path, now).await?,
            Access::ReadOnly => schema::check_current(&client, &store.inner.path).await?,
        }
        Ok(store)
    }

    /// The database, as shown to people (no password).
    pub fn location(&self) -> &PgLocation {
        &self.inner.location
    }

    /// The location as a path, for [`StoreError`]s that name one.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The options the store was opened with.
    pub fn options(&self) -> &StoreOptions {
        &self.inner.options
    }

    /// Stops the listener and closes the pool's connections. Every later
    /// operation on any clone fails with [`StoreError::Closed`].
    pub async fn close(&self) -> Result<(), StoreError> {
        if self.inner.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        if let Some(task) = self
            .inner
            .listener
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            task.abort();
        }
        self.inner.pool.close();
        Ok(())
    }

    /// A pooled connection, mapping failures to the first open's terms.
    async fn connect(&self) -> Result<Object, StoreError> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return Err(StoreError::Closed);
        }
        self.inner
            .pool
            .get()
            .await
            .map_err(|error| StoreError::CannotOpen {
                path: self.inner.path.clone(),
                reason: failure::chain(&error),
            })
    }

    /// A connection to read with.
    pub(crate) async fn reader(&self) -> Result<Object, StoreError> {
        self.connect().await
    }

    /// A connection to write with; refused on a read-only store.
    pub(crate) async fn writer(&self) -> Result<Object, StoreError> {
        if self.inner.options.access == Access::ReadOnly {
            return Err(StoreError::ReadOnly {
                path: self.inner.path.clone(),
            });
        }
        self.connect().await
    }

    /// `value` with every secret replaced.
    pub(crate) fn redacted<T: crate::sqlite::Redact>(&self, value: T) -> T {
        value.redact(&self.inner.options.redactor)
    }

    /// The time and id generator of a write that starts now.
    pub(crate) fn ctx(&self) -> Ctx<'_> {
        Ctx {
            now: self.inner.options.clock.now(),
            ids: &self.inner.ids,
        }
    }

    /// A failure in the store's terms.
    pub(crate) fn error(&self, failure: PgFailure) -> StoreError {
        failure.into_store_error(&self.inner.path)
    }

    /// A read-only transaction that sees one snapshot.
    pub(crate) async fn snapshot<'c>(
        &self,
        client: &'c mut Object,
    ) -> Result<Transaction<'c>, StoreError> {
        client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(|error| self.error(error.into()))
    }

    /// Records a memory revision this process committed.
    pub(crate) fn saw_revision(&self, rev: i64) {
        self.inner.revisions.latest.fetch_max(rev, Ordering::SeqCst);
    }

    /// The newest memory revision, from the listener when it is up, else
    /// from the server (starting the listener on first use).
    pub(crate) async fn current_revision(&self) -> Result<i64, StoreError> {
        self.start_listener();
        let revisions = &self.inner.revisions;
        let recently_asked = revisions
            .asked_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some_and(|at| at.elapsed() < REVISION_TRUST);
        if revisions.listening.load(Ordering::SeqCst) && recently_asked {
            return Ok(revisions.latest.load(Ordering::SeqCst));
        }
        let client = self.reader().await?;
        let row = client
            .query_one("SELECT rev FROM memory_state WHERE id = 1", &[])
            .await
            .map_err(|error| self.error(error.into()))?;
        let rev: i64 = row.get(0);
        *revisions
            .asked_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(std::time::Instant::now());
        self.saw_revision(rev);
        Ok(rev)
    }

    fn start_listener(&self) {
        let mut slot = self
            .inner
            .listener
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if slot.is_some() || self.inner.closed.load(Ordering::SeqCst) {
            return;
        }
        let Ok(tls) = tls(&self.inner.location) else {
            return;
        };
        let config = self.inner.location.config.clone();
        let revisions = Arc::clone(&self.inner.revisions);
        let display = self.inner.location.display.clone();
        *slot = Some(tokio::spawn(listen(config, tls, revisions, display)));
    }

    /// Runs a statement list outside any transaction (for tests and tools
    /// that manage databases).
    #[doc(hidden)]
    pub async fn execute_batch(&self, sql: &str) -> Result<(), StoreError> {
        let client = self.writer().await?;
        client
            .batch_execute(sql)
            .await
            .map_err(|error| self.error(error.into()))
    }
}

/// Keeps a connection that listens for memory revisions, reconnecting
/// after a second whenever it drops; `revisions.listening` says whether
/// `revisions.latest` can be trusted.
async fn listen(config: Config, tls: MakeRustlsConnect, revisions: Arc<Revisions>, place: String) {
    loop {
        match config.connect(tls.clone()).await {
            Ok((client, mut connection)) => {
                let shared = Arc::clone(&revisions);
                let driver = tokio::spawn(async move {
                    let mut messages =
                        futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
                    while let Some(message) = messages.next().await {
                        match message {
                            Ok(AsyncMessage::Notification(note)) => {
                                if let Ok(rev) = note.payload().parse::<i64>() {
                                    shared.latest.fetch_max(rev, Ordering::SeqCst);
                                }
                            }
                            Ok(_) => {}
                            Err(_) => break,
                        }
                    }
                });
                let ready = async {
                    client
                        .batch_execute(&format!("LISTEN {MEMORY_CHANNEL}"))
                        .await?;
                    let row = client
                        .query_one("SELECT rev FROM memory_state WHERE id = 1", &[])
                        .await?;
                    Ok::<i64, tokio_postgres::Error>(row.get(0))
                }
                .await;
                match ready {
                    Ok(rev) => {
                        revisions.latest.fetch_max(rev, Ordering::SeqCst);
                        revisions.listening.store(true, Ordering::SeqCst);
                        let _ = driver.await;
                        tracing::debug!(database = %place, "the memory listener lost its connection");
                    }
                    Err(error) => {
                        tracing::debug!(database = %place, %error, "the memory listener could not listen");
                        driver.abort();
                    }
                }
                revisions.listening.store(false, Ordering::SeqCst);
                drop(client);
            }
            Err(error) => {
                tracing::debug!(database = %place, %error, "the memory listener cannot connect");
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod sslmode_tests {
    use super::*;

    fn verifies(url: &str, env: &[(&str, &str)]) -> (bool, SslMode) {
        let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
        let location = PgLocation::parse(url, env).unwrap();
        (location.verify, location.config.get_ssl_mode())
    }

    /// As libpq: `prefer` and `require` encrypt without checking the
    /// certificate (a stock server's is self-signed); the verifying modes,
    /// in the URL or `PGSSLMODE`, check it.
    #[test]
    fn the_certificate_is_checked_only_when_asked() {
        let url = "postgres://u@db.example/records";
        assert_eq!(verifies(url, &[]), (false, SslMode::Prefer));
        assert_eq!(
            verifies(&format!("{url}?sslmode=require"), &[]),
            (false, SslMode::Require)
        );
        assert_eq!(
            verifies(
                &format!("{url}?sslmode=verify-full&application_name=x"),
                &[]
            ),
            (true, SslMode::Require)
        );
        assert_eq!(
            verifies(url, &[("PGSSLMODE", "verify-ca")]),
            (true, SslMode::Require)
        );
        assert_eq!(
            verifies(url, &[("PGSSLMODE", "disable")]),
            (false, SslMode::Disable)
        );
    }
}
