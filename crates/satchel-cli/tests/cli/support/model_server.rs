//! Real OpenAI-compatible model servers for the tests, serving
//! SmolLM2-135M-Instruct on 127.0.0.1: llama.cpp's server from PyPI
//! (`llama-cpp-python[server]`, [`ModelServer::start`]) and llama.cpp's own
//! C++ `llama-server` ([`ModelServer::llama_server`]), all installed into
//! `.peers/` by `scripts/install-model-server.sh` (which `scripts/test`
//! calls). A missing server or model fails the test with that instruction;
//! nothing skips.
//!
//! `llama-cpp-python` serves one request at a time, and a new request
//! interrupts the one in progress; `llama-server` with one slot queues
//! them. Each test starts its own.

#![allow(dead_code, unreachable_pub)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The name the server gives the model (`--model_alias`).
pub const MODEL: &str = "smollm2-135m";

/// How long a server may take to load the model.
const START_LIMIT: Duration = Duration::from_secs(120);

/// A running server; stopped when dropped.
pub struct ModelServer {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

fn installed(relative: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../.peers")
        .join(relative);
    assert!(
        path.exists(),
        "{} is missing: run scripts/install-model-server.sh (CI's .ci/run does)",
        path.display()
    );
    path
}

impl ModelServer {
    /// Starts the server with native tool calling (`chatml-function-calling`)
    /// and waits until it answers.
    pub fn start() -> ModelServer {
        let python = installed("llm-venv/bin/python");
        let model = installed("models/smollm2-135m.gguf");
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        let child = Command::new(python)
            .args(["-m", "llama_cpp.server", "--model"])
            .arg(model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--chat_format", "chatml-function-calling"])
            .args(["--n_ctx", "8192", "--n_threads", "1"])
            .args(["--model_alias", MODEL])
            .env("HOME", dir.path())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(dir.path().join("stderr.log")).unwrap())
            .spawn()
            .unwrap();
        let mut server = ModelServer {
            child,
            port,
            log,
            _dir: dir,
        };
        server.wait_until_ready();
        server
    }

    /// Starts llama.cpp's own `llama-server` with one slot and a context
    /// of `context` tokens (its chat template through `--jinja`), and
    /// waits until it answers.
    pub fn llama_server(context: u32) -> ModelServer {
        let binary = installed("llama-server/bin/llama-server");
        let model = installed("models/smollm2-135m.gguf");
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        let child = Command::new(binary)
            .arg("-m")
            .arg(model)
            .args([
                "--jinja",
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
            ])
            .args(["-np", "1", "-c", &context.to_string(), "-t", "1"])
            .args(["--alias", MODEL])
            .env("HOME", dir.path())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(dir.path().join("stderr.log")).unwrap())
            .spawn()
            .unwrap();
        let mut server = ModelServer {
            child,
            port,
            log,
            _dir: dir,
        };
        server.wait_until_ready();
        server
    }

    fn wait_until_ready(&mut self) {
        let started = Instant::now();
        while started.elapsed() < START_LIMIT {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("the model server exited with {status}: {}", self.stderr());
            }
            if models_answer(self.port) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!(
            "the model server did not answer within {START_LIMIT:?}: {}",
            self.stderr()
        );
    }

    fn stderr(&self) -> String {
        let path = self.log.with_file_name("stderr.log");
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let start = text.len().saturating_sub(2_000);
        text[text.floor_char_boundary(start)..].to_owned()
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The API root to configure (`llm.baseUrl`).
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// True when `GET /v1/models` answers 200.
fn models_answer(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok() && head.ends_with(b"200")
}
