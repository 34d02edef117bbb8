//! Satchel as an MCP client, end to end through the binary (issue #42):
//! what an imported tool returns reaches `tools call --json` and a client
//! of `mcp serve` (the official Python SDK) intact, and every error the
//! client shows (`mcp servers`, `tools list`, `doctor`, a failed call)
//! is words, never a Rust type name.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::cli::{Sandbox, stderr, stdout_json};
use crate::peers_dir::peer;

fn everything() -> PathBuf {
    peer("node_modules/.bin/mcp-server-everything")
}

/// The Python SDK server of `satchel-mcp`'s fault tests (`die` mode
/// exits at start with a message on stderr).
fn crashy_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../satchel-mcp/tests/support/crashy_server.py")
}

/// `sandbox` with a trusted project and `servers` as its mcp.json.
fn with_servers(servers: Value) -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.write_config(r#"{"permissions": {"mode": "trust"}}"#);
    std::fs::write(
        sandbox.project().join(".agents/mcp.json"),
        json!({ "mcpServers": servers }).to_string(),
    )
    .unwrap();
    sandbox
}

/// A resource block's timestamp (the reference server writes the time
/// into each resource) masked, so two calls compare.
fn masked(block: &Value) -> Value {
    let mut block = block.clone();
    if let Some(text) = block["resource"]["text"].as_str() {
        block["resource"]["text"] = json!(text.split(" at ").next().unwrap_or_default());
    }
    if let Some(blob) = block["resource"]["blob"].as_str() {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(blob)
            .unwrap();
        let text = String::from_utf8(bytes).unwrap();
        block["resource"]["blob"] = json!(text.split(" at ").next().unwrap_or_default());
    }
    block
}

/// The embedded resource of a `get-resource-reference` result's content.
fn resource_block(content: &Value) -> Value {
    content
        .as_array()
        .unwrap()
        .iter()
        .find(|block| block["type"] == "resource")
        .unwrap_or_else(|| panic!("no resource block in {content}"))
        .clone()
}

#[test]
fn embedded_resources_reach_tools_call_json_and_mcp_serve_clients_intact() {
    let sandbox = with_servers(json!({
        "everything": {"command": everything(), "args": ["stdio"]},
    }));

    // `tools call --json`: the blob itself, not its size.
    for kind in ["Text", "Blob"] {
        let output = sandbox.run(&[
            "tools",
            "call",
            "everything__get-resource-reference",
            &json!({"resourceType": kind, "resourceId": 1}).to_string(),
            "--json",
        ]);
        assert!(output.status.success(), "{}", stderr(&output));
        let whole = stdout_json(&output);
        let parts = whole["results"].as_array().unwrap();
        let block = parts
            .iter()
            .find(|part| part["type"] == "json" && part["json"]["type"] == "resource")
            .unwrap_or_else(|| panic!("{whole}"))["json"]
            .clone();
        let resource = &block["resource"];
        assert_eq!(
            resource["uri"],
            format!("demo://resource/dynamic/{}/1", kind.to_lowercase()),
            "{block}"
        );
        assert_eq!(resource["mimeType"], "text/plain", "{block}");
        if kind == "Blob" {
            let blob = resource["blob"]
                .as_str()
                .unwrap_or_else(|| panic!("{block}"));
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(blob)
                .unwrap();
            let text = String::from_utf8(bytes).unwrap();
            assert!(
                text.starts_with("Resource 1: This is a base64 blob created at "),
                "{text}"
            );
        } else {
            assert!(
                resource["text"]
                    .as_str()
                    .unwrap()
                    .starts_with("Resource 1: This is a plaintext resource"),
                "{block}"
            );
        }
    }

    // Through `mcp serve` to the Python SDK: the same blocks the server
    // sends a client that calls it directly.
    let env: serde_json::Map<String, Value> = [
        ("XDG_CONFIG_HOME", sandbox.dir.path().join("config")),
        ("XDG_DATA_HOME", sandbox.dir.path().join("data")),
        ("XDG_CACHE_HOME", sandbox.dir.path().join("cache")),
        ("SATCHEL_LIBEXEC_DIR", sandbox.dir.path().join("libexec")),
        ("TMPDIR", sandbox.dir.path().to_path_buf()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), json!(v)))
    .chain([
        ("SATCHEL_TRUST_PROJECT".to_owned(), json!("1")),
        ("SATCHEL_MODEL_FETCH".to_owned(), json!("never")),
        (
            "PATH".to_owned(),
            json!(std::env::var("PATH").unwrap_or_default()),
        ),
    ])
    .collect();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/python_passthrough.py");
    let output = Command::new(peer("venv/bin/python"))
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_satchel"))
        .arg(sandbox.project())
        .arg(Value::Object(env).to_string())
        .arg(everything())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let report = stdout_json(&output);
    // Annotations and resource links arrive as the server sent them.
    for key in ["annotated", "links"] {
        assert_eq!(
            report["served"][key]["content"], report["direct"][key]["content"],
            "{key}"
        );
    }
    for kind in ["Text", "Blob"] {
        let direct = &report["direct"][kind];
        let served = &report["served"][kind];
        assert_ne!(served["isError"], true, "{served}");
        let (direct, served) = (
            resource_block(&direct["content"]),
            resource_block(&served["content"]),
        );
        assert_eq!(masked(&served), masked(&direct));
        // The blob is base64 of the same length: nothing cut or re-encoded.
        if kind == "Blob" {
            assert_eq!(
                served["resource"]["blob"].as_str().unwrap().len(),
                direct["resource"]["blob"].as_str().unwrap().len()
            );
        }
    }
}

/// A `::`-qualified name (`rmcp::transport::…`), which no person should read.
fn type_names(text: &str) -> Vec<&str> {
    text.split(|c: char| c.is_whitespace() || c == '"' || c == '`' || c == '\'')
        .filter(|word| {
            word.split("::").count() > 1
                && word.split("::").all(|part| {
                    part.chars()
                        .next()
                        .is_some_and(|c| c.is_alphanumeric() || c == '_')
                })
        })
        .collect()
}

#[test]
fn client_errors_are_words_without_type_names() {
    let refused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = refused.local_addr().unwrap().port();
    drop(refused);
    let sandbox = with_servers(json!({
        "refused": {"type": "http", "url": format!("http://127.0.0.1:{port}/mcp")},
        "dies": {"command": peer("venv/bin/python"), "args": [crashy_script(), "die"]},
        "crashy": {"command": peer("venv/bin/python"), "args": [crashy_script(), "stdio"]},
    }));
    let mut seen = Vec::new();
    for args in [
        &["mcp", "servers"][..],
        &["mcp", "servers", "--json"],
        &["tools", "list"],
        &["doctor"],
        &["tools", "call", "crashy__crash", r#"{"after": 0.2}"#],
        &[
            "tools",
            "call",
            "crashy__crash",
            r#"{"after": 0.2}"#,
            "--json",
        ],
    ] {
        let output = sandbox.run(args);
        let text = format!(
            "{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            stderr(&output)
        );
        assert_eq!(
            type_names(&text),
            Vec::<&str>::new(),
            "`satchel {}`:\n{text}",
            args.join(" ")
        );
        seen.push(text);
    }
    let servers = &seen[0];
    assert!(servers.contains("connection refused"), "{servers}");
    assert!(
        servers.contains("exited with status 3") && servers.contains("cannot open the database"),
        "{servers}"
    );
    let crashed = &seen[4];
    assert!(crashed.contains("went away"), "{crashed}");
}

/// `mcp import` reads every client's list, shows what it would add, then
/// writes the user's mcp.json with references kept (no secret written
/// out), and the imported reference server starts from it.
#[test]
fn mcp_import_brings_other_clients_servers_with_references_kept() {
    let sandbox = Sandbox::new();
    let home = sandbox.dir.path().join("home");
    let write = |path: PathBuf, text: String| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        sandbox
            .dir
            .path()
            .join("config/Claude/claude_desktop_config.json"),
        json!({"mcpServers": {"everything": {"command": everything(), "args": ["stdio"],
            "env": {"EVERYTHING_API_KEY": "sk-literal-secret"}}}})
        .to_string(),
    );
    write(
        sandbox.project().join(".mcp.json"),
        json!({"mcpServers": {"docs": {"type": "http", "url": "https://docs.example/mcp",
            "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}}})
        .to_string(),
    );
    write(
        home.join(".cursor/mcp.json"),
        json!({"mcpServers": {"docs": {"url": "https://other.example/mcp"},
            "search": {"url": "https://search.example/mcp", "headers": {"X-Api-Key": "${env:SEARCH_KEY}"}}}})
        .to_string(),
    );
    write(
        sandbox.project().join(".vscode/mcp.json"),
        json!({"inputs": [{"id": "pat", "type": "promptString"}],
            "servers": {"gh": {"type": "stdio", "command": "gh-mcp", "env": {"GH_TOKEN": "${input:pat}"}}}})
        .to_string(),
    );
    write(
        home.join(".codex/config.toml"),
        "[mcp_servers.notes]\nurl = \"https://notes.example/mcp\"\nbearer_token_env_var = \"NOTES_TOKEN\"\n".into(),
    );
    let run = |args: &[&str]| {
        sandbox
            .command(args)
            .env("HOME", &home)
            .env_remove("CODEX_HOME")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };

    let shown = run(&["mcp", "import", "--dry-run"]);
    assert!(shown.status.success(), "{}", stderr(&shown));
    let text = String::from_utf8_lossy(&shown.stdout).into_owned();
    for name in ["everything", "docs", "search", "gh", "notes"] {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
    assert!(text.contains("would add 5 servers"), "{text}");
    assert!(text.contains("set EVERYTHING_API_KEY"), "{text}");
    let target = sandbox.dir.path().join("config/satchel/mcp.json");
    assert!(!target.exists(), "--dry-run wrote {}", target.display());

    let added = run(&["mcp", "import"]);
    assert!(added.status.success(), "{}", stderr(&added));
    let written = std::fs::read_to_string(&target).unwrap();
    assert!(!written.contains("sk-literal-secret"), "{written}");
    let servers = &serde_json::from_str::<Value>(&written).unwrap()["mcpServers"];
    assert_eq!(
        servers["everything"]["env"]["EVERYTHING_API_KEY"],
        "${EVERYTHING_API_KEY}"
    );
    // The project's Claude Code list is read first: its `docs` wins.
    assert_eq!(servers["docs"]["url"], "https://docs.example/mcp");
    assert_eq!(
        servers["docs"]["headers"]["Authorization"],
        "Bearer ${DOCS_TOKEN}"
    );
    assert_eq!(servers["search"]["headers"]["X-Api-Key"], "${SEARCH_KEY}");
    assert_eq!(servers["gh"]["env"]["GH_TOKEN"], "${GH_PAT}");
    assert_eq!(
        servers["notes"]["headers"]["Authorization"],
        "Bearer ${NOTES_TOKEN}"
    );

    // Again: nothing new.
    let again = run(&["mcp", "import"]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("nothing to add"));

    // The imported reference server runs from the written file.
    let listed = sandbox
        .command(&["mcp", "servers", "--json"])
        .env("HOME", &home)
        .env("EVERYTHING_API_KEY", "x")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let statuses = stdout_json(&listed);
    let everything = statuses
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "everything")
        .unwrap();
    assert_eq!(everything["state"], "running", "{everything}");
}

/// Under `mcp serve`, a stdio server that exits mid-call: the client's
/// call ends saying the server went away, and the server's tools answer
/// again as soon as it has restarted (issue #42 saw 15 s and more).
#[test]
fn mcp_serve_brings_back_a_stdio_server_that_crashed_mid_call() {
    let sandbox = with_servers(json!({
        "crashy": {"command": peer("venv/bin/python"), "args": [crashy_script(), "stdio"]},
    }));
    let env: serde_json::Map<String, Value> = [
        ("XDG_CONFIG_HOME", sandbox.dir.path().join("config")),
        ("XDG_DATA_HOME", sandbox.dir.path().join("data")),
        ("XDG_CACHE_HOME", sandbox.dir.path().join("cache")),
        ("SATCHEL_LIBEXEC_DIR", sandbox.dir.path().join("libexec")),
        ("TMPDIR", sandbox.dir.path().to_path_buf()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), json!(v)))
    .chain([
        ("SATCHEL_TRUST_PROJECT".to_owned(), json!("1")),
        ("SATCHEL_MODEL_FETCH".to_owned(), json!("never")),
    ])
    .collect();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/python_crash.py");
    let output = Command::new(peer("venv/bin/python"))
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_satchel"))
        .arg(sandbox.project())
        .arg(Value::Object(env).to_string())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let report = stdout_json(&output);
    assert_ne!(report["first"]["isError"], true, "{report}");
    let crash = &report["crash"];
    assert_eq!(crash["isError"], true, "{report}");
    assert!(crash.to_string().contains("went away"), "{report}");
    assert_ne!(report["hello"]["isError"], true, "{report}");
    assert!(
        report["hello"].to_string().contains("hello again"),
        "{report}"
    );
    // Generous for a loaded machine: bench/mcp-faults.sh measures it.
    let back_after = report["back_after"].as_f64().unwrap();
    assert!(
        back_after < 10.0,
        "callable again only after {back_after} s"
    );
    eprintln!("callable again {back_after:.2} s after the crashed call");
}
