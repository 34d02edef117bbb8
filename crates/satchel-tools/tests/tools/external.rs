//! External tools end to end: real executables in real directories,
//! discovered, probed and called through the registry.

use std::future::Future;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use satchel_core::{ErrorCode, ToolCall, ToolOutput};
use satchel_tools::external::{SpecCache, ToolDirs, discover};
use satchel_tools::{
    ExternalConfig, LiveRegistry, Registry, ToolContext, ToolLevel, ToolSource, ToolsConfig,
};
use serde_json::{Value, json};

const TEST_BOUND: Duration = Duration::from_secs(60);

async fn bounded<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(TEST_BOUND, future)
        .await
        .expect("test exceeded its time bound")
}

/// A project with the three tool directories.
struct Fixture {
    root: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let fixture = Fixture {
            root: tempfile::tempdir().unwrap(),
        };
        for level in ["project", "user", "system"] {
            std::fs::create_dir_all(fixture.root.path().join(level)).unwrap();
        }
        fixture
    }

    fn dir(&self, level: &str) -> PathBuf {
        self.root.path().join(level)
    }

    fn dirs(&self) -> ToolDirs {
        ToolDirs {
            project: Some(self.dir("project")),
            user: Some(self.dir("user")),
            system: Some(self.dir("system")),
        }
    }

    /// Writes an executable script.
    fn script(&self, level: &str, file: &str, body: &str) -> PathBuf {
        let path = self.dir(level).join(file);
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// A bash tool that answers `--schema` with `schema` and runs `body` on a call.
    fn tool(&self, level: &str, file: &str, schema: &Value, body: &str) -> PathBuf {
        let script = format!(
            "#!/bin/bash\nif [ \"$1\" = --schema ]; then cat <<'JSON'\n{schema}\nJSON\nexit 0; fi\n{body}\n"
        );
        self.script(level, file, &script)
    }

    async fn registry(&self, config: &ExternalConfig) -> Arc<Registry> {
        let live = LiveRegistry::load(self.dirs(), SpecCache::in_memory(), config.clone())
            .await
            .unwrap();
        live.current()
    }
}

fn object_schema() -> Value {
    json!({"description": "test tool", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}})
}

fn config() -> ExternalConfig {
    ExternalConfig {
        schema_timeout: Duration::from_millis(1500),
        ..ExternalConfig::default()
    }
}

async fn call_in(
    registry: &Registry,
    dir: &Path,
    name: &str,
    input: Value,
    tools: ToolsConfig,
) -> ToolOutput {
    let ctx = ToolContext {
        conversation_id: Some("conv-7".into()),
        ..ToolContext::standalone("call-42", dir.to_path_buf(), Arc::new(tools))
    };
    bounded(registry.call(
        &ToolCall {
            id: "call-42".into(),
            name: name.into(),
            input,
        },
        &ctx,
    ))
    .await
}

async fn call(registry: &Registry, name: &str, input: Value) -> ToolOutput {
    call_in(
        registry,
        &std::env::temp_dir(),
        name,
        input,
        ToolsConfig::default(),
    )
    .await
}

fn results(output: &ToolOutput) -> &Value {
    output
        .results
        .structured()
        .expect("external results are one JSON value")
}

#[tokio::test]
async fn echo_tool_gets_stdin_and_environment() {
    let fx = Fixture::new();
    fx.tool(
        "project",
        "echo-env-tool",
        &object_schema(),
        r#"input=$(cat); printf '{"input": %s, "call": "%s", "conversation": "%s"}' "$input" "$SATCHEL_TOOL_CALL_ID" "$SATCHEL_CONVERSATION_ID""#,
    );
    let registry = fx.registry(&config()).await;
    let out = call(&registry, "echo_env", json!({"text": "hi"})).await;
    assert!(!out.is_error, "{out:?}");
    assert_eq!(
        results(&out),
        &json!({"input": {"text": "hi"}, "call": "call-42", "conversation": "conv-7"})
    );
    assert!(out.user_message.starts_with("ran `echo_env` in "));
}

#[tokio::test]
async fn inputs_are_validated_before_the_tool_runs() {
    let fx = Fixture::new();
    let marker = fx.root.path().join("ran");
    fx.tool(
        "project",
        "strict",
        &object_schema(),
        &format!("touch {}; echo '{{}}'", marker.display()),
    );
    let registry = fx.registry(&config()).await;
    let out = call(&registry, "strict", json!({"text": 5})).await;
    assert_eq!(out.error_code, Some(ErrorCode::InvalidParams));
    assert!(!marker.exists(), "the tool ran on invalid input");
}

/// Issue #22: calling a tool whose spec is broken answered
/// `TOOL_NOT_FOUND` although `tools list` showed why it is broken.
#[tokio::test]
async fn a_tool_with_a_broken_schema_is_unavailable_not_missing() {
    let fx = Fixture::new();
    fx.script(
        "project",
        "broken-schema",
        "#!/bin/bash\necho '{\"inputSchema\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": 7}}}}'\n",
    );
    let registry = fx.registry(&config()).await;
    let out = call(&registry, "broken_schema", json!({})).await;
    assert_eq!(out.error_code, Some(ErrorCode::ToolUnavailable));
    let message = results(&out)["error"].as_str().unwrap();
    assert!(
        message.contains("installed but cannot be used: invalid input schema"),
        "{message}"
    );
    let out = call(&registry, "no_such_tool", json!({})).await;
    assert_eq!(out.error_code, Some(ErrorCode::ToolNotFound));
}

#[tokio::test]
async fn broken_hanging_and_non_tools_are_skipped_with_reasons() {
    let fx = Fixture::new();
    fx.script(
        "project",
        "broken-schema",
        "#!/bin/bash\necho '{\"inputSchema\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": 7}}}}'\n",
    );
    fx.script("project", "hangs", "#!/bin/bash\nsleep 1000\n");
    fx.script(
        "project",
        "fails",
        "#!/bin/bash\necho 'no schema for you' >&2; exit 3\n",
    );
    fx.script("project", "bad.name", "#!/bin/bash\necho '{}'\n");
    std::fs::write(fx.dir("project").join("README.md"), "not a tool").unwrap();
    std::fs::create_dir(fx.dir("project").join("subdir")).unwrap();
    fx.tool("project", "good-tool", &object_schema(), "echo '{}'");

    let cfg = ExternalConfig {
        schema_timeout: Duration::from_millis(300),
        ..config()
    };
    let started = std::time::Instant::now();
    let discovery = bounded(discover(&fx.dirs(), &SpecCache::in_memory(), &cfg)).await;
    // The hanging probe costs its own time limit, not more (and not the others').
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let names: Vec<&str> = discovery
        .tools
        .iter()
        .map(|t| satchel_tools::Tool::spec(t).name.as_str())
        .collect();
    assert_eq!(names, ["good"]);

    let reason = |file: &str| {
        let skipped = discovery
            .skipped
            .iter()
            .find(|s| s.path.ends_with(file))
            .unwrap_or_else(|| panic!("{file} not skipped"));
        (skipped.reason.clone(), skipped.broken)
    };
    assert!(
        reason("broken-schema")
            .0
            .starts_with("invalid input schema"),
        "{:?}",
        reason("broken-schema")
    );
    assert_eq!(
        reason("hangs"),
        ("`--schema` did not answer within 300 ms".into(), true)
    );
    assert_eq!(
        reason("fails"),
        (
            "`--schema` exited with status 3; stderr: no schema for you".into(),
            true
        )
    );
    assert!(reason("bad.name").0.contains("rename it to `bad`"));
    assert_eq!(
        reason("README.md"),
        (
            "not executable (`chmod +x` it to make it a tool)".into(),
            false
        )
    );
    assert_eq!(
        reason("subdir"),
        ("a directory, not an executable".into(), false)
    );
}

#[tokio::test]
async fn project_beats_user_beats_system() {
    let fx = Fixture::new();
    for level in ["project", "user", "system"] {
        fx.tool(
            level,
            "clash-tool",
            &object_schema(),
            &format!("echo '{{\"from\": \"{level}\"}}'"),
        );
    }
    fx.tool(
        "user",
        "user-only",
        &object_schema(),
        "echo '{\"from\": \"user\"}'",
    );
    fx.tool(
        "system",
        "user-only",
        &object_schema(),
        "echo '{\"from\": \"system\"}'",
    );
    fx.tool(
        "system",
        "system-only",
        &object_schema(),
        "echo '{\"from\": \"system\"}'",
    );
    let live = LiveRegistry::load(fx.dirs(), SpecCache::in_memory(), config())
        .await
        .unwrap();
    let registry = live.current();

    assert_eq!(
        results(&call(&registry, "clash", json!({})).await)["from"],
        "project"
    );
    assert_eq!(
        results(&call(&registry, "user_only", json!({})).await)["from"],
        "user"
    );
    assert_eq!(
        results(&call(&registry, "system_only", json!({})).await)["from"],
        "system"
    );
    assert_eq!(
        registry.get("clash").unwrap().source(),
        ToolSource::External {
            level: ToolLevel::Project,
            path: fx.dir("project").join("clash-tool")
        }
    );
    let shadowed: Vec<_> = live
        .skipped()
        .iter()
        .filter(|s| s.reason.starts_with("shadowed"))
        .map(|s| s.level)
        .collect();
    assert_eq!(
        shadowed,
        [ToolLevel::User, ToolLevel::System, ToolLevel::System]
    );
}

#[tokio::test]
async fn a_broken_project_tool_falls_back_to_the_users() {
    let fx = Fixture::new();
    fx.script("project", "dual", "#!/bin/bash\necho 'not json'\n");
    fx.tool(
        "user",
        "dual",
        &object_schema(),
        "echo '{\"from\": \"user\"}'",
    );
    let registry = fx.registry(&config()).await;
    assert_eq!(
        results(&call(&registry, "dual", json!({})).await)["from"],
        "user"
    );
}

/// A tool compiled in, as Satchel's built-ins are.
struct CompiledIn(satchel_core::ToolSpec);

impl CompiledIn {
    fn named(name: &str) -> CompiledIn {
        CompiledIn(satchel_core::ToolSpec {
            name: name.into(),
            title: None,
            description: "compiled in".into(),
            input_schema: json!({"type": "object"}),
            output_schema: None,
            annotations: Default::default(),
            capabilities: Default::default(),
        })
    }
}

#[async_trait::async_trait]
impl satchel_tools::Tool for CompiledIn {
    fn spec(&self) -> &satchel_core::ToolSpec {
        &self.0
    }

    async fn run(
        &self,
        _input: serde_json::Value,
        _ctx: &satchel_tools::ToolContext,
    ) -> Result<satchel_core::ToolOutput, satchel_tools::ToolError> {
        Ok(satchel_core::ToolOutput::success(
            satchel_core::ToolResults::json(json!({"builtin": true})),
            "ok",
        ))
    }
}

#[tokio::test]
async fn external_tools_never_replace_builtins() {
    let fx = Fixture::new();
    fx.tool(
        "project",
        "bash-tool",
        &object_schema(),
        "echo '{\"fake\": true}'",
    );
    let live = LiveRegistry::load_with(
        vec![Arc::new(CompiledIn::named("bash"))],
        fx.dirs(),
        SpecCache::in_memory(),
        config(),
    )
    .await
    .unwrap();
    assert_eq!(
        live.current().get("bash").unwrap().source(),
        ToolSource::Builtin
    );
    assert!(
        live.skipped()
            .iter()
            .any(|s| s.reason == "shadowed by the built-in tool `bash`")
    );
}

#[tokio::test]
async fn bad_outputs_become_structured_errors() {
    let fx = Fixture::new();
    fx.tool(
        "project",
        "not-json",
        &object_schema(),
        "echo 'hello there'",
    );
    fx.tool(
        "project",
        "error-object",
        &object_schema(),
        r#"echo '{"error": "no such city", "error_code": "INVALID_PARAMS", "hint": "try Paris"}'"#,
    );
    fx.tool(
        "project",
        "odd-error",
        &object_schema(),
        r#"echo '{"error": "quota exceeded", "error_code": "QUOTA"}'"#,
    );
    fx.tool(
        "project",
        "exits",
        &object_schema(),
        "echo 'something broke' >&2; exit 4",
    );
    fx.tool(
        "project",
        "stderr-only",
        &object_schema(),
        "echo 'only a warning' >&2",
    );
    fx.tool("project", "signalled", &object_schema(), "kill -9 $$");
    let registry = fx.registry(&config()).await;

    let out = call(&registry, "not_json", json!({})).await;
    assert_eq!(out.error_code, Some(ErrorCode::InvalidOutput));
    assert_eq!(
        results(&out)["error"],
        "tool `not_json` printed output that is not JSON: \"hello there\""
    );

    let out = call(&registry, "error_object", json!({})).await;
    assert!(out.is_error);
    assert_eq!(out.error_code, Some(ErrorCode::InvalidParams));
    assert_eq!(
        results(&out),
        &json!({"error": "no such city", "error_code": "INVALID_PARAMS", "hint": "try Paris"})
    );

    let out = call(&registry, "odd_error", json!({})).await;
    assert!(out.is_error);
    assert_eq!(
        out.error_code, None,
        "an unknown code is kept in the results, not invented"
    );
    assert_eq!(results(&out)["error_code"], "QUOTA");

    let out = call(&registry, "exits", json!({})).await;
    assert_eq!(out.error_code, Some(ErrorCode::ToolCrashed));
    assert_eq!(
        results(&out)["error"],
        "tool `exits` exited with status 4; stderr: something broke"
    );

    let out = call(&registry, "stderr_only", json!({})).await;
    assert_eq!(out.error_code, Some(ErrorCode::InvalidOutput));
    assert_eq!(
        results(&out)["error"],
        "tool `stderr_only` printed nothing on stdout; stderr: only a warning"
    );

    let out = call(&registry, "signalled", json!({})).await;
    assert_eq!(out.error_code, Some(ErrorCode::ToolCrashed));
    assert_eq!(
        results(&out)["error"],
        "tool `signalled` exited with status 137"
    );
}

#[tokio::test]
async fn output_schema_is_enforced() {
    let fx = Fixture::new();
    let schema = json!({"inputSchema": {"type": "object"}, "outputSchema": {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}});
    fx.tool("project", "typed", &schema, "echo '{\"n\": \"seven\"}'");
    let registry = fx.registry(&config()).await;
    let out = call(&registry, "typed", json!({})).await;
    assert_eq!(out.error_code, Some(ErrorCode::InvalidOutput));
    assert_eq!(results(&out)["violations"][0]["path"], "/n");
}

#[tokio::test]
async fn timeouts_use_the_tools_own_default() {
    let fx = Fixture::new();
    let schema = json!({"inputSchema": {"type": "object"}, "timeout": 0.5});
    fx.tool(
        "project",
        "slow",
        &schema,
        "echo 'working' >&2; sleep 30; echo '{}'",
    );
    let registry = fx.registry(&config()).await;
    let started = std::time::Instant::now();
    let out = call(&registry, "slow", json!({})).await;
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(out.error_code, Some(ErrorCode::ToolTimeout));
    assert_eq!(
        results(&out)["error"],
        "tool `slow` did not finish within 0.5 s and was stopped; stderr: working"
    );
}

#[tokio::test]
async fn a_tool_that_never_reads_stdin_still_works() {
    let fx = Fixture::new();
    fx.tool("project", "deaf", &object_schema(), "echo '{\"ok\": true}'");
    let registry = fx.registry(&config()).await;
    let big = "x".repeat(4 * 1024 * 1024);
    let out = call(&registry, "deaf", json!({"text": big})).await;
    assert_eq!(results(&out), &json!({"ok": true}));
}

#[tokio::test]
async fn megabytes_of_output_are_bounded() {
    let fx = Fixture::new();
    let spill = tempfile::tempdir().unwrap();
    fx.tool(
        "project",
        "flood",
        &object_schema(),
        r#"printf '{"data": "'; head -c 5000000 /dev/zero | tr '\0' a; printf '"}'"#,
    );
    fx.tool(
        "project",
        "large",
        &object_schema(),
        r#"printf '{"data": "'; head -c 500000 /dev/zero | tr '\0' b; printf '"}'"#,
    );
    let registry = fx.registry(&config()).await;
    let mut tools = ToolsConfig::default();
    tools.runner.spill.dir = Some(spill.path().to_path_buf());

    let out = call_in(
        &registry,
        &std::env::temp_dir(),
        "flood",
        json!({}),
        tools.clone(),
    )
    .await;
    assert_eq!(out.error_code, Some(ErrorCode::InvalidOutput));
    let message = results(&out)["error"].as_str().unwrap().to_owned();
    assert!(
        message.starts_with("tool `flood` printed 5000012 bytes, more than the 1048576-byte limit"),
        "{message}"
    );
    let spill_path = message.split("is in ").nth(1).unwrap();
    assert_eq!(std::fs::metadata(spill_path).unwrap().len(), 5_000_012);

    let out = call_in(&registry, &std::env::temp_dir(), "large", json!({}), tools).await;
    assert_eq!(results(&out)["data"].as_str().unwrap().len(), 500_000);
}

#[tokio::test]
async fn concurrent_calls_to_one_tool_stay_separate() {
    let fx = Fixture::new();
    fx.tool(
        "project",
        "echo",
        &object_schema(),
        "input=$(cat); sleep 0.1; echo \"$input\"",
    );
    let registry = fx.registry(&config()).await;
    let calls = (0..24).map(|n| {
        let registry = registry.clone();
        async move { call(&registry, "echo", json!({"text": format!("call {n}")})).await }
    });
    let outputs = bounded(futures_util::future::join_all(calls)).await;
    for (n, out) in outputs.iter().enumerate() {
        assert_eq!(results(out), &json!({"text": format!("call {n}")}));
    }
}

#[tokio::test]
async fn specs_are_cached_by_path_size_and_mtime() {
    let fx = Fixture::new();
    // Discovery runs sandboxed: the one place it may write is its TMPDIR.
    let counter = satchel_tools::sandbox::private_tmp().unwrap().join(format!(
        "probes-{}",
        fx.root.path().file_name().unwrap().to_string_lossy()
    ));
    let body = |version: &str| {
        format!(
            "#!/bin/bash\nif [ \"$1\" = --schema ]; then echo x >> \"$TMPDIR/{}\"; echo '{{\"description\": \"{version}\", \"inputSchema\": {{\"type\": \"object\"}}}}'; exit 0; fi\necho '{{}}'\n",
            counter.file_name().unwrap().to_string_lossy()
        )
    };
    let path = fx.script("project", "counted", &body("v1"));
    let cache_file = fx.root.path().join("cache/specs.json");
    let probes = || {
        std::fs::read_to_string(&counter)
            .unwrap_or_default()
            .lines()
            .count()
    };

    for _ in 0..3 {
        let live = LiveRegistry::load(
            fx.dirs(),
            SpecCache::persistent(cache_file.clone()),
            config(),
        )
        .await
        .unwrap();
        assert_eq!(
            live.current().get("counted").unwrap().spec().description,
            "v1"
        );
    }
    assert_eq!(probes(), 1, "the spec should have come from the cache");

    std::fs::write(&path, body("version two")).unwrap();
    let live = LiveRegistry::load(
        fx.dirs(),
        SpecCache::persistent(cache_file.clone()),
        config(),
    )
    .await
    .unwrap();
    assert_eq!(
        live.current().get("counted").unwrap().spec().description,
        "version two"
    );
    assert_eq!(probes(), 2);

    let report = live.refresh(true).await.unwrap();
    assert!(!report.is_change());
    assert_eq!(probes(), 3, "refresh with reprobe asks the tool again");
}

#[tokio::test]
async fn a_running_registry_picks_up_new_tools() {
    let fx = Fixture::new();
    let cfg = ExternalConfig {
        watch_interval: Duration::from_millis(100),
        ..config()
    };
    let live = Arc::new(
        LiveRegistry::load(fx.dirs(), SpecCache::in_memory(), cfg)
            .await
            .unwrap(),
    );
    let mut changes = live.subscribe();
    let _watcher = live.spawn_watcher();
    assert!(live.current().get("late").is_none());

    fx.tool(
        "user",
        "late-tool",
        &object_schema(),
        "echo '{\"late\": true}'",
    );
    bounded(changes.changed()).await.unwrap();
    let registry = live.current();
    assert_eq!(
        results(&call(&registry, "late", json!({})).await),
        &json!({"late": true})
    );

    std::fs::remove_file(fx.dir("user").join("late-tool")).unwrap();
    bounded(changes.changed()).await.unwrap();
    assert!(live.current().get("late").is_none());
}

/// The example tools shipped in `examples/tools/`, each in its language.
#[tokio::test]
async fn example_tools_work() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/tools")
        .canonicalize()
        .unwrap();
    let dirs = ToolDirs {
        project: Some(examples.clone()),
        user: None,
        system: None,
    };
    let live = LiveRegistry::load(dirs, SpecCache::in_memory(), config())
        .await
        .unwrap();
    assert!(
        live.skipped().iter().all(|s| !s.broken),
        "{:?}",
        live.skipped()
    );
    let registry = live.current();

    let out = call(
        &registry,
        "calc",
        json!({"expression": "(2 + 3) * sqrt(16) - 2 ** 3"}),
    )
    .await;
    assert_eq!(
        results(&out),
        &json!({"expression": "(2 + 3) * sqrt(16) - 2 ** 3", "value": 12.0})
    );
    let out = call(&registry, "calc", json!({"expression": "__import__('os')"})).await;
    assert_eq!(out.error_code, Some(ErrorCode::InvalidParams));

    let out = call(
        &registry,
        "url_parse",
        json!({"url": "https://example.com:8443/a/b?q=rust&q=go&x=1#top"}),
    )
    .await;
    assert_eq!(
        results(&out),
        &json!({"protocol": "https", "username": "", "hostname": "example.com", "port": 8443, "pathname": "/a/b",
                "query": {"q": ["rust", "go"], "x": "1"}, "fragment": "top"})
    );
    let out = call(&registry, "url_parse", json!({"url": "not a url"})).await;
    assert_eq!(out.error_code, Some(ErrorCode::InvalidParams));

    let text_dir = tempfile::tempdir().unwrap();
    std::fs::write(text_dir.path().join("poem.txt"), "one two\nthree\n").unwrap();
    let out = call_in(
        &registry,
        text_dir.path(),
        "word_count",
        json!({"path": "poem.txt"}),
        ToolsConfig::default(),
    )
    .await;
    assert_eq!(
        results(&out),
        &json!({"path": "poem.txt", "lines": 2, "words": 3, "bytes": 14})
    );
    let out = call_in(
        &registry,
        text_dir.path(),
        "word_count",
        json!({"path": "missing.txt"}),
        ToolsConfig::default(),
    )
    .await;
    assert_eq!(out.error_code, Some(ErrorCode::InvalidParams));
}

#[tokio::test]
async fn skeletons_pass_their_own_schema_check_and_run() {
    use satchel_tools::external::{Language, skeleton};
    for language in [Language::Bash, Language::Python] {
        let fx = Fixture::new();
        fx.script("project", "fresh-tool", &skeleton("fresh", language));
        let live = LiveRegistry::load(fx.dirs(), SpecCache::in_memory(), config())
            .await
            .unwrap();
        assert!(
            live.skipped().is_empty(),
            "{language}: {:?}",
            live.skipped()
        );
        let registry = live.current();
        let out = call(&registry, "fresh", json!({"text": "héllo"})).await;
        assert_eq!(
            results(&out),
            &json!({"text": "héllo", "length": 5}),
            "{language}"
        );
        let out = call(&registry, "fresh", json!({"text": ""})).await;
        assert_eq!(out.error_code, Some(ErrorCode::InvalidParams), "{language}");
    }
}
