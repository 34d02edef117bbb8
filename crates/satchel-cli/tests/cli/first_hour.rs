//! Issue #22, "the first hour": configuration that explains itself
//! (warnings with the nearest key, `config show` with sources), `satchel
//! doctor --json` on a healthy and a broken setup, memories stored before
//! the embedding model was there getting embeddings, and a closed pipe.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::Stdio;

use crate::support::project::Project;
use serde_json::{Value, json};

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout_json(output: &std::process::Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            stderr(output)
        )
    })
}

/// An OpenAI-compatible server that only answers `GET /v1/models`,
/// listing `model`; on a thread, for as long as the test runs.
fn models_server(model: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().take(20) {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            // Request line and headers; GET has no body.
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let body =
                json!({"object": "list", "data": [{"id": model, "object": "model"}]}).to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

fn check<'v>(report: &'v Value, name: &str) -> &'v Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {report}"))
}

/// `toolCalling` at the top level was silently ignored (issue #22).
#[test]
fn unknown_keys_and_wrong_types_are_warnings_with_the_nearest_key() {
    let project = Project::new(&json!({
        "toolCalling": "prompted",
        "llm": {"modle": "x"},
        "externalTools": {"timeoutSecs": "soon"}
    }));
    let output = project.satchel(&["tools", "list", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stderr(&output);
    let file = project.path("project/.agents/agent.json");
    let file = file.display();
    assert!(
        text.contains(&format!(
            "{file}:2:3: `toolCalling` is not a key Satchel reads (did you mean `llm.toolCalling`?); ignored"
        )),
        "{text}"
    );
    assert!(
        text.contains("`externalTools.timeoutSecs`: invalid type: string \"soon\""),
        "{text}"
    );
}

#[test]
fn config_show_says_where_each_value_came_from() {
    let project = Project::new(&json!({"maxTurns": 7, "llm": {"model": "from-file"}}));
    std::fs::create_dir_all(project.path("config/satchel")).unwrap();
    std::fs::write(
        project.path("config/satchel/agent.json"),
        r#"{"maxTurns": 5, "contextThreshold": 0.5}"#,
    )
    .unwrap();
    let db = project.path("elsewhere.db");
    let output = project
        .command(&["--db", db.to_str().unwrap(), "config", "show", "--json"])
        .env("SATCHEL_MODEL", "from-env")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let shown = stdout_json(&output);
    let value = |key: &str| {
        shown["values"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["key"] == key)
            .unwrap_or_else(|| panic!("{key} not shown: {shown}"))
            .clone()
    };
    let source = |key: &str| (value(key)["value"].clone(), value(key)["source"].clone());
    assert_eq!(source("maxTurns"), (json!(7), json!("project file")));
    assert_eq!(source("contextThreshold"), (json!(0.5), json!("user file")));
    assert_eq!(
        source("llm.model"),
        (json!("from-env"), json!("environment"))
    );
    assert_eq!(value("llm.model")["from"], "SATCHEL_MODEL");
    assert_eq!(
        source("toolResultMaxLength"),
        (json!(500), json!("default"))
    );
    assert_eq!(source("db"), (json!(db), json!("flag")));

    let text = project.satchel(&["config", "show"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("maxTurns") && l.contains("# project file")),
        "{text}"
    );

    let schema = project.satchel(&["config", "schema"]);
    assert_eq!(stdout_json(&schema)["title"], "Satchel agent.json");
}

#[test]
fn doctor_on_a_healthy_setup() {
    let url = models_server("tiny-model");
    let project = Project::new(&json!({
        "llm": {"baseUrl": url, "model": "tiny-model"},
        "memory": {"modelDir": satchel_memory::testing::model_dir()},
        "search": {"backends": ["duckduckgo"]}
    }));
    let output = project.satchel(&["doctor", "--json"]);
    let report = stdout_json(&output);
    assert!(output.status.success(), "{report:#}\n{}", stderr(&output));
    assert_eq!(report["ok"], true);
    for name in [
        "project trust",
        "configuration",
        "model",
        "embedding model",
        "database",
        "search",
        "external tools",
        "mcp servers",
    ] {
        assert_eq!(check(&report, name)["status"], "ok", "{name}: {report:#}");
    }
    let model = check(&report, "model")["summary"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(model.contains("tiny-model at http://127.0.0.1:"), "{model}");
}

#[test]
fn doctor_on_a_broken_setup_says_what_to_fix() {
    // A port nothing listens on: bind, note it, let it go.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let project = Project::new(&json!({
        "llm": {"baseUrl": format!("http://127.0.0.1:{port}/v1"), "model": "m"},
        "memory": {"modelDir": "no-model-here"},
        "maxTurn": 3
    }));
    std::fs::create_dir_all(project.path("data/satchel")).unwrap();
    std::fs::write(
        project.path("data/satchel/satchel.db"),
        "not a database at all",
    )
    .unwrap();
    std::fs::create_dir_all(project.path("project/.agents/tools")).unwrap();
    let tool = project.path("project/.agents/tools/broken-tool");
    std::fs::write(&tool, "#!/bin/sh\necho 'not json'\n").unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    let output = project
        .command(&["doctor", "--json"])
        .env("SATCHEL_SANDBOX_DISABLE", "landlock")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report = stdout_json(&output);
    assert_eq!(report["ok"], false);
    let expect = [
        ("configuration", "warn"),
        ("model", "fail"),
        ("embedding model", "warn"),
        ("database", "fail"),
        ("search", "warn"),
        ("external tools", "warn"),
        ("sandbox", "fail"),
    ];
    for (name, status) in expect {
        let found = check(&report, name);
        assert_eq!(found["status"], status, "{name}: {found:#}");
        assert!(found["fix"].is_string(), "{name} says no fix: {found:#}");
    }
    assert!(
        check(&report, "configuration")["details"][0]
            .as_str()
            .unwrap()
            .contains("did you mean `maxTurns`?"),
        "{report:#}"
    );
}

/// Memories stored before the model was fetched kept `no embedding 3`
/// for ever (issue #22); now the next memory command embeds them.
#[test]
fn memories_stored_before_the_model_get_embeddings() {
    let project = Project::new(&json!({"memory": {"modelDir": "no-model-here"}}));
    for text in ["Alice is the user's sister", "The user likes black tea"] {
        let stored = project.satchel(&["memory", "store", "long", text]);
        assert!(stored.status.success(), "{}", stderr(&stored));
    }
    let stats = stdout_json(&project.satchel(&["memory", "stats", "--json"]));
    assert_eq!(stats["embedding_backlog"], 2, "{stats:#}");
    assert_eq!(stats["semantic_recall"], false);

    project.write_config(&json!({"memory": {"modelDir": satchel_memory::testing::model_dir()}}));
    let recalled = project.satchel(&["memory", "recall", "favourite hot beverage", "--json"]);
    assert!(recalled.status.success(), "{}", stderr(&recalled));
    let stats = stdout_json(&project.satchel(&["memory", "stats", "--json"]));
    assert_eq!(stats["embedding_backlog"], 0, "{stats:#}");
    let recalled =
        stdout_json(&project.satchel(&["memory", "recall", "favourite hot beverage", "--json"]));
    assert_eq!(
        recalled["memories"][0]["content"], "The user likes black tea",
        "{recalled:#}"
    );
}

/// `satchel ... | head` printed `error: Broken pipe` (issue #22), and
/// `completions` panicked on it.
#[test]
fn a_closed_pipe_exits_quietly() {
    let project = Project::new(&json!({}));
    for args in [
        &["config", "schema"][..],
        &["completions", "bash"],
        &["man"],
    ] {
        let mut child = project
            .command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away before the output (several KB) is written.
        drop(child.stdout.take());
        let mut errors = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut errors)
            .unwrap();
        let status = child.wait().unwrap();
        assert_eq!(errors, "", "{args:?}: nothing said on a closed pipe");
        assert!(
            status.success() || status.code() == Some(141),
            "{args:?}: {status:?}"
        );
    }
}

/// `doctor --fix` installs bun where Satchel looks for runtimes after
/// PATH: a runtime there is found by the `code` tool and the doctor.
#[test]
fn runtimes_in_satchels_own_directory_are_found() {
    let project = Project::new(&json!({}));
    let bin = project.path("data/satchel/runtimes/js/node_modules/.bin");
    std::fs::create_dir_all(&bin).unwrap();
    let bun = bin.join("bun");
    std::fs::write(&bun, "#!/bin/sh\necho 1.4.5\n").unwrap();
    std::fs::set_permissions(&bun, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let output = project
        .command(&["doctor", "--json", "--offline"])
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let report = stdout_json(&output);
    let details = check(&report, "code runtimes")["details"].to_string();
    assert!(
        details.contains(&format!("typescript: {}", bun.display())),
        "{details}"
    );
}

/// Offline (the package index unreachable), the first memory use tries
/// to fetch the model once, says why it could not, and recall says once
/// that it ranks by keywords only and how to fix it.
#[test]
fn offline_the_memory_says_keywords_only_and_how_to_fix_it() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let project = Project::new(&json!({}));
    let run = |args: &[&str]| {
        project
            .command(args)
            .env_remove("SATCHEL_MODEL_FETCH")
            .env("PIP_INDEX_URL", format!("http://127.0.0.1:{port}/simple"))
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let stored = run(&["memory", "store", "long", "The user likes black tea"]);
    assert!(stored.status.success(), "{}", stderr(&stored));
    assert!(
        stderr(&stored)
            .contains("the embedding model could not be fetched: cannot reach the package index"),
        "{}",
        stderr(&stored)
    );
    let recalled = run(&["memory", "recall", "tea"]);
    assert!(recalled.status.success(), "{}", stderr(&recalled));
    let text = stderr(&recalled);
    assert_eq!(text.matches("keywords only").count(), 1, "{text}");
    assert!(text.contains("`satchel doctor --fix` fetches it"), "{text}");
    assert!(
        !text.contains("scripts/"),
        "names no clone-only script: {text}"
    );
    assert!(String::from_utf8_lossy(&recalled.stdout).contains("black tea"));
}
