//! For tests and benches only (hidden from the docs): a real PostgreSQL
//! server in a temporary directory, started once per process on
//! 127.0.0.1, and a fresh database in it for every test.
//!
//! Where the server comes from, first match wins:
//! - `SATCHEL_TEST_PG_URL`: a server someone else runs (a superuser URL;
//!   tests create databases named `satchel_test_*` in it);
//! - `SATCHEL_TEST_PG_BIN`, else `/usr/lib/postgresql/<newest>/bin`: the
//!   binaries to `initdb` a cluster with (as the `postgres` user when
//!   running as root, which initdb refuses), stopped and removed when the
//!   process exits.
//!
//! Without either, tests that need the server are skipped with a loud
//! message, unless `SATCHEL_TEST_PG_REQUIRED=1` (set by `scripts/test`
//! once `scripts/install-postgres.sh` succeeded), when they fail.
//! `scripts/install-postgres.sh` installs Debian's `postgresql`.

#![allow(clippy::print_stderr)] // The skip message must be seen.
#![allow(
    clippy::disallowed_methods,
    reason = "test support: it reads its own variables and runs initdb, pg_ctl and psql itself"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// A running server tests may create databases in.
#[derive(Debug)]
pub struct TestServer {
    /// `postgres://postgres@127.0.0.1:PORT` (no database).
    base: String,
    /// The `bin` directory, when this process started the server.
    bin: Option<PathBuf>,
}

static SERVER: OnceLock<Result<TestServer, String>> = OnceLock::new();
static DATABASES: AtomicU32 = AtomicU32::new(0);

/// The process's server, started on first use; `None` (after a loud
/// message) when PostgreSQL is not installed and not required.
///
/// # Panics
/// When the server cannot be started, or is missing but required.
pub fn server() -> Option<&'static TestServer> {
    let server = SERVER.get_or_init(start);
    match server {
        Ok(server) => Some(server),
        Err(reason) => {
            let required = std::env::var("SATCHEL_TEST_PG_REQUIRED").is_ok_and(|v| v == "1");
            if required {
                panic!("PostgreSQL is required for these tests and unavailable: {reason}");
            }
            eprintln!(
                "\n!!!!! SKIPPED: a PostgreSQL test ({reason}); run scripts/install-postgres.sh or set SATCHEL_TEST_PG_BIN !!!!!\n"
            );
            None
        }
    }
}

impl TestServer {
    /// A new, empty database of its own; returns its URL.
    ///
    /// # Panics
    /// When the server refuses to create it.
    pub fn new_database(&self) -> String {
        let name = format!(
            "satchel_test_{}_{}",
            std::process::id(),
            DATABASES.fetch_add(1, Ordering::SeqCst)
        );
        let url = format!("{}/postgres", self.base);
        let status = psql(
            self.bin.as_deref(),
            &url,
            &format!("CREATE DATABASE {name}"),
        );
        assert!(status, "could not create the test database {name}");
        format!("{}/{name}", self.base)
    }

    /// Runs one SQL command on database `url`; true when it succeeded.
    pub fn run_sql(&self, url: &str, sql: &str) -> bool {
        psql(self.bin.as_deref(), url, sql)
    }
}

fn psql(bin: Option<&Path>, url: &str, sql: &str) -> bool {
    let program = bin.map_or(PathBuf::from("psql"), |bin| bin.join("psql"));
    Command::new(program)
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// The newest `/usr/lib/postgresql/*/bin` that has `initdb`.
fn find_bin() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("SATCHEL_TEST_PG_BIN") {
        return Some(PathBuf::from(bin));
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// A command run as the `postgres` user when we are root.
fn as_owner(program: PathBuf) -> Command {
    if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

fn start() -> Result<TestServer, String> {
    if let Ok(url) = std::env::var("SATCHEL_TEST_PG_URL") {
        return Ok(TestServer {
            base: url.trim_end_matches('/').to_owned(),
            bin: find_bin(),
        });
    }
    let bin = find_bin().ok_or("no PostgreSQL binaries in /usr/lib/postgresql/*/bin")?;
    let dir = std::env::temp_dir().join(format!(
        "satchel-pg-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
    ));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if is_root() {
        let chowned = Command::new("chown")
            .arg("postgres:")
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        if !chowned {
            return Err(
                "running as root and cannot hand the cluster to the `postgres` user".into(),
            );
        }
    }
    let data = dir.join("data");
    let output = as_owner(bin.join("initdb"))
        .arg("-D")
        .arg(&data)
        .args([
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            "--no-sync",
        ])
        .output()
        .map_err(|e| format!("initdb: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "initdb failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let mut last_error = String::new();
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=400",
            dir.display()
        );
        let output = as_owner(bin.join("pg_ctl"))
            .arg("-D")
            .arg(&data)
            .args(["-o", &options, "-w", "-t", "60", "-l"])
            .arg(dir.join("server.log"))
            .arg("start")
            .output()
            .map_err(|e| format!("pg_ctl: {e}"))?;
        if output.status.success() {
            stop_when_we_exit(&bin, &dir, &data);
            return Ok(TestServer {
                base: format!("postgres://postgres@127.0.0.1:{port}"),
                bin: Some(bin),
            });
        }
        last_error = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
    }
    Err(format!("the server did not start: {last_error}"))
}

/// A watcher that stops the cluster and removes its directory once this
/// process has exited.
fn stop_when_we_exit(bin: &Path, dir: &Path, data: &Path) {
    let runner = if is_root() {
        "runuser -u postgres -- "
    } else {
        ""
    };
    let script = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 1; done; {runner}'{pg_ctl}' -D '{data}' -m immediate stop >/dev/null 2>&1; rm -rf '{dir}'",
        pid = std::process::id(),
        pg_ctl = bin.join("pg_ctl").display(),
        data = data.display(),
        dir = dir.display(),
    );
    let _ = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
}
