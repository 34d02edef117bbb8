//! A temporary project for end-to-end tests of the `satchel` binary: its
//! own `.agents/agent.json`, config, data and cache directories and
//! database, so no test touches the user's state; and `satchel run --json`
//! with its transcript parsed.

#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// A project directory with its own XDG directories.
pub struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    /// An empty project whose agent.json is `config`.
    pub fn new(config: &Value) -> Project {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project/.agents")).unwrap();
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        let project = Project { dir };
        project.write_config(config);
        project
    }

    /// Replaces .agents/agent.json.
    pub fn write_config(&self, config: &Value) {
        std::fs::write(
            self.path("project/.agents/agent.json"),
            serde_json::to_string_pretty(config).unwrap(),
        )
        .unwrap();
    }

    /// A path under the temporary directory (`project/...` for the project).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `satchel ARGS` in the project, with its own directories and none of
    /// the caller's model, database, token or log settings; stdio as the
    /// caller sets it.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_satchel"));
        command
            .args(args)
            .current_dir(self.path("project"))
            .env("XDG_CONFIG_HOME", self.path("config"))
            // Its own project: trusted (tests/trust.rs checks the untrusted path).
            .env("SATCHEL_TRUST_PROJECT", "1")
            .env("XDG_DATA_HOME", self.path("data"))
            .env("SATCHEL_MODEL_FETCH", "never")
            .env("XDG_CACHE_HOME", self.path("cache"))
            .env("SATCHEL_LIBEXEC_DIR", self.path("libexec"))
            .env("TMPDIR", self.dir.path())
            .env("NO_COLOR", "1")
            .env_remove("SATCHEL_DB")
            .env_remove("SATCHEL_MODEL")
            .env_remove("SATCHEL_MCP_TOKEN")
            .env_remove("TELEGRAM_BOT_TOKEN")
            .env_remove("OPENAI_BASE_URL")
            .env_remove("OPENAI_API_KEY")
            .env_remove("RUST_LOG");
        command
    }

    /// Runs `satchel ARGS` in the project with no terminal (see
    /// [`Project::command`]).
    pub fn satchel(&self, args: &[&str]) -> Output {
        self.command(args).stdin(Stdio::null()).output().unwrap()
    }

    /// `satchel run --json PROMPT` (after `--resume ID` when given): the
    /// transcript and the process output.
    pub fn run(&self, prompt: &str, resume: Option<&str>) -> (Value, Output) {
        let mut args = vec!["run", "--json"];
        if let Some(id) = resume {
            args.extend(["--resume", id]);
        }
        args.push(prompt);
        let output = self.satchel(&args);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let transcript = serde_json::from_str(&stdout).unwrap_or_else(|error| {
            panic!(
                "not JSON ({error}): {stdout}\nstderr: {}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
        (transcript, output)
    }
}

/// The log entries of a `run --json` transcript, as `(kind, text)`.
pub fn log_entries(transcript: &Value) -> Vec<(String, String)> {
    transcript["log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap_or_default().to_owned(),
                e["text"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// `over` merged into `base`, objects key by key.
pub fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                merge(base.entry(key).or_insert(Value::Null), value);
            }
        }
        (slot, value) => *slot = value,
    }
}
