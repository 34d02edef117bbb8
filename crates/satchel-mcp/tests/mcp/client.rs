//! Satchel's MCP client against servers written here: an rmcp server over
//! streamable HTTP (calls, errors, timeouts, progress, cancellation) and a
//! small stdio server in bash (process groups, ordered shutdown, crashes
//! and restarts, startup failures, name collisions).

use std::collections::BTreeMap;
use std::future::Future;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ProgressNotificationParam, RequestMetaObject};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{Peer, RoleServer, tool, tool_router};
use satchel_core::{ErrorCode, ToolCall, ToolOutput, ToolResults};
use satchel_mcp::client::{
    ManagerOptions, McpConfig, RestartPolicy, ServerConfig, TransportConfig,
};
use satchel_mcp::{McpManager, ServerState, ServerStatus};
use satchel_tools::external::{SpecCache, ToolDirs};
use satchel_tools::{ExternalConfig, LiveRegistry, ToolContext, ToolsConfig};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub(crate) async fn bounded<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(90), future)
        .await
        .expect("test took longer than 90 s")
}

// ---------------------------------------------------------------- fixtures

pub(crate) struct Fixture {
    pub(crate) dir: tempfile::TempDir,
    live: Arc<LiveRegistry>,
}

impl Fixture {
    pub(crate) async fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("tools")).unwrap();
        std::fs::create_dir_all(dir.path().join("marks")).unwrap();
        let dirs = ToolDirs {
            project: Some(dir.path().join("tools")),
            user: None,
            system: None,
        };
        let live = LiveRegistry::load(dirs, SpecCache::in_memory(), ExternalConfig::default())
            .await
            .unwrap();
        Fixture {
            dir,
            live: Arc::new(live),
        }
    }

    fn marks(&self, name: &str) -> PathBuf {
        let dir = self.dir.path().join("marks").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A config entry running the bash test server in `mode`.
    fn sh_server(&self, name: &str, mode: &str) -> ServerConfig {
        let script = self.dir.path().join("server.sh");
        if !script.exists() {
            std::fs::write(&script, SH_SERVER).unwrap();
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        server(
            name,
            TransportConfig::Stdio {
                command: script.display().to_string(),
                args: vec![self.marks(name).display().to_string(), mode.into()],
                env: BTreeMap::new(),
                cwd: self.dir.path().to_path_buf(),
            },
        )
    }

    pub(crate) fn start(&self, servers: Vec<ServerConfig>, options: ManagerOptions) -> McpManager {
        let config = McpConfig {
            servers: servers.into_iter().map(|s| (s.name.clone(), s)).collect(),
            warnings: vec![],
        };
        McpManager::start(self.live.clone(), config, options)
    }

    pub(crate) async fn call(&self, name: &str, input: Value) -> ToolOutput {
        self.call_with(name, input, CancellationToken::new()).await
    }

    async fn call_with(&self, name: &str, input: Value, cancel: CancellationToken) -> ToolOutput {
        let mut ctx = ToolContext::standalone(
            "t",
            self.dir.path().to_path_buf(),
            Arc::new(ToolsConfig::default()),
        );
        ctx.cancel = cancel;
        let call = ToolCall {
            id: "t".into(),
            name: name.into(),
            input,
        };
        self.live.current().call(&call, &ctx).await
    }
}

pub(crate) fn server(name: &str, transport: TransportConfig) -> ServerConfig {
    ServerConfig {
        name: name.into(),
        transport,
        startup_timeout: Duration::from_secs(20),
        call_timeout: Duration::from_secs(20),
        tool_timeouts: BTreeMap::new(),
        declared_in: PathBuf::from("mcp.json"),
        problem: None,
    }
}

pub(crate) fn fast() -> ManagerOptions {
    ManagerOptions {
        restart: RestartPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_millis(200),
            stable_after: Duration::from_secs(60),
        },
        shutdown_grace: Duration::from_millis(300),
        roots: Vec::new(),
    }
}

pub(crate) fn status(manager: &McpManager, name: &str) -> ServerStatus {
    manager
        .statuses()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap()
}

pub(crate) async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(30), "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => true,
    }
}

fn pids(path: &Path) -> Vec<i32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect()
}

fn events(marks: &Path) -> Vec<String> {
    std::fs::read_to_string(marks.join("events"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A stdio MCP server in bash + jq. `$1` is a directory for marks
/// (`pids`: its own, `helpers`: a background child in its group, `events`:
/// what happened), `$2` a mode: `clean` exits when stdin closes, `linger`
/// ignores that and leaves on SIGTERM, `stubborn` ignores SIGTERM too,
/// `flaky` exits right after listing its tools.
const SH_SERVER: &str = r#"#!/bin/bash
marks=$1; mode=$2
trap 'echo term >> "$marks/events"; [ "$mode" = stubborn ] || exit 0' TERM
echo $$ >> "$marks/pids"
sleep 1000 & echo $! >> "$marks/helpers"
while IFS= read -r line; do
    method=$(jq -r '.method // empty' <<<"$line")
    id=$(jq -c '.id // empty' <<<"$line")
    [ -z "$id" ] && continue
    case "$method" in
        initialize) result='{"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"sh","version":"1"}}';;
        tools/list) result='{"tools":[{"name":"crash","inputSchema":{"type":"object"}},{"name":"hello","description":"Says hello","inputSchema":{"type":"object","properties":{"who":{"type":"string"}}},"annotations":{"readOnlyHint":true}}]}';;
        tools/call)
            name=$(jq -r '.params.name' <<<"$line")
            if [ "$name" = crash ]; then echo crash >> "$marks/events"; exit 7; fi
            who=$(jq -r '.params.arguments.who // "world"' <<<"$line")
            result=$(jq -cn --arg t "hello $who" '{content: [{type: "text", text: $t}]}');;
        *) printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"unknown method"}}\n' "$id"; continue;;
    esac
    printf '{"jsonrpc":"2.0","id":%s,"result":%s}\n' "$id" "$result"
    if [ "$method" = tools/list ] && [ "$mode" = flaky ]; then echo "flaked" >&2; exit 3; fi
done
echo eof >> "$marks/events"
if [ "$mode" = linger ] || [ "$mode" = stubborn ]; then
    while :; do sleep 0.05; done
fi
"#;

// ------------------------------------------------------------ stdio server

#[tokio::test]
async fn stdio_tools_are_imported_and_called() {
    bounded(async {
        let fx = Fixture::new().await;
        let manager = fx.start(vec![fx.sh_server("sh", "clean")], fast());
        manager.ready().await;
        let st = status(&manager, "sh");
        assert_eq!(st.state, ServerState::Running, "{st:?}");
        let names: Vec<&str> = st.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["sh__crash", "sh__hello"]);
        assert!(st.pid.is_some());

        let registry = fx.live.current();
        let hello = registry.get("sh__hello").unwrap();
        assert_eq!(hello.spec().description, "Says hello");
        assert_eq!(hello.spec().annotations.read_only_hint, Some(true));
        assert_eq!(hello.source().to_string(), "mcp (sh)");

        let output = fx.call("sh__hello", json!({"who": "satchel"})).await;
        assert!(!output.is_error, "{output:?}");
        assert_eq!(output.results, ToolResults::Text("hello satchel".into()));
        assert!(
            output
                .user_message
                .starts_with("called `hello` on MCP server `sh` in ")
        );
        // Satchel validates against the server's schema before sending.
        let output = fx.call("sh__hello", json!({"who": 3})).await;
        assert_eq!(output.error_code, Some(ErrorCode::InvalidParams));

        manager.shutdown().await;
        assert_eq!(status(&manager, "sh").state, ServerState::Stopped);
        assert!(fx.live.current().get("sh__hello").is_none());
    })
    .await;
}

/// Shuts a one-server manager down and checks what the server saw and
/// that its whole process group is gone.
async fn check_shutdown(mode: &str, expected: &[&str]) {
    let fx = Fixture::new().await;
    let manager = fx.start(vec![fx.sh_server("sh", mode)], fast());
    manager.ready().await;
    assert_eq!(status(&manager, "sh").state, ServerState::Running);
    let marks = fx.marks("sh");
    manager.shutdown().await;
    assert_eq!(events(&marks), expected, "mode {mode}");
    for pid in pids(&marks.join("pids"))
        .into_iter()
        .chain(pids(&marks.join("helpers")))
    {
        assert!(
            process_gone(pid),
            "mode {mode}: {pid} survived the shutdown"
        );
    }
}

#[tokio::test]
async fn shutdown_closes_stdin_then_terms_then_kills_the_group() {
    bounded(async {
        // Leaves when stdin closes; its background helper is stopped after.
        check_shutdown("clean", &["eof"]).await;
        // Ignores stdin closing: SIGTERM.
        check_shutdown("linger", &["eof", "term"]).await;
        // Ignores SIGTERM too: SIGKILL.
        check_shutdown("stubborn", &["eof", "term"]).await;
    })
    .await;
}

#[tokio::test]
async fn a_crashed_server_is_restarted_and_its_tools_keep_working() {
    bounded(async {
        let fx = Fixture::new().await;
        let manager = fx.start(vec![fx.sh_server("sh", "clean")], fast());
        manager.ready().await;
        let first_pid = status(&manager, "sh").pid.unwrap();

        let output = fx.call("sh__crash", json!({})).await;
        assert!(output.is_error);
        assert_eq!(
            output.error_code,
            Some(ErrorCode::ToolCrashed),
            "{output:?}"
        );
        let message = output.results.structured().unwrap()["error"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(message.contains("went away during `crash`"), "{message}");

        wait_until("the server restarted", || {
            let st = status(&manager, "sh");
            st.state == ServerState::Running && st.restarts == 1
        })
        .await;
        let st = status(&manager, "sh");
        assert_ne!(st.pid, Some(first_pid));
        assert!(
            st.last_error
                .as_deref()
                .unwrap()
                .contains("exited with status 7"),
            "{st:?}"
        );
        assert!(process_gone(first_pid));
        let output = fx.call("sh__hello", json!({})).await;
        assert_eq!(output.results, ToolResults::Text("hello world".into()));
        manager.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_server_that_keeps_crashing_is_given_up_and_loses_its_tools() {
    bounded(async {
        let fx = Fixture::new().await;
        let manager = fx.start(vec![fx.sh_server("sh", "flaky")], fast());
        manager.ready().await;
        wait_until("the manager gave up", || {
            matches!(status(&manager, "sh").state, ServerState::Failed { .. })
        })
        .await;
        let st = status(&manager, "sh");
        let ServerState::Failed { reason } = &st.state else {
            unreachable!()
        };
        assert!(
            reason.starts_with("gave up after 3 restarts in a row"),
            "{reason}"
        );
        assert!(reason.contains("flaked"), "{reason}");
        assert!(st.tools.is_empty());
        assert!(fx.live.current().get("sh__hello").is_none());
        // Calls to a tool of a failed server name the problem.
        let output = fx.call("sh__hello", json!({})).await;
        assert_eq!(output.error_code, Some(ErrorCode::ToolNotFound));
        manager.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn servers_that_fail_to_start_do_not_stop_the_others() {
    bounded(async {
        let fx = Fixture::new().await;
        let hang_pid = fx.dir.path().join("hang.pid");
        let mut hang = server(
            "hang",
            TransportConfig::Stdio {
                command: "bash".into(),
                args: vec![
                    "-c".into(),
                    format!("echo $$ > {}; exec sleep 1000", hang_pid.display()),
                ],
                env: BTreeMap::new(),
                cwd: fx.dir.path().to_path_buf(),
            },
        );
        hang.startup_timeout = Duration::from_millis(500);
        let missing = server(
            "missing",
            TransportConfig::Stdio {
                command: "/nonexistent/mcp-server".into(),
                args: vec![],
                env: BTreeMap::new(),
                cwd: fx.dir.path().to_path_buf(),
            },
        );
        let mut unset = fx.sh_server("unset", "clean");
        unset.problem = Some("environment variable `TOKEN` is not set".into());
        let refused = server(
            "refused",
            TransportConfig::Http {
                url: "http://127.0.0.1:9/mcp".into(),
                headers: BTreeMap::new(),
                lifecycle: Default::default(),
                oauth: Default::default(),
            },
        );
        let manager = fx.start(
            vec![hang, missing, unset, refused, fx.sh_server("sh", "clean")],
            fast(),
        );
        manager.ready().await;
        let reason = |name: &str| match status(&manager, name).state {
            ServerState::Failed { reason } => reason,
            other => panic!("{name}: {other:?}"),
        };
        assert_eq!(
            reason("hang"),
            "did not start and list its tools within 0.5 s"
        );
        assert!(reason("missing").starts_with("cannot start `/nonexistent/mcp-server`"));
        assert_eq!(reason("unset"), "environment variable `TOKEN` is not set");
        // A remote server that does not answer is tried again (it may
        // start late), saying why it is not up yet.
        match status(&manager, "refused").state {
            ServerState::Restarting { reason, .. } => {
                assert!(reason.contains("127.0.0.1:9"), "{reason}")
            }
            other => panic!("refused: {other:?}"),
        }
        assert_eq!(status(&manager, "sh").state, ServerState::Running);
        let pid: i32 = std::fs::read_to_string(&hang_pid)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        wait_until("the hung server was killed", || process_gone(pid)).await;
        manager.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn colliding_names_are_made_unique_and_reported() {
    bounded(async {
        let fx = Fixture::new().await;
        // A project tool already has one of the names.
        let tool = fx.dir.path().join("tools/my_srv__crash");
        std::fs::write(
            &tool,
            "#!/bin/bash\nif [ \"$1\" = --schema ]; then echo '{\"inputSchema\": {\"type\": \"object\"}}'; exit 0; fi\necho '{}'\n",
        )
        .unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        fx.live.refresh(true).await.unwrap();

        let manager = fx.start(
            vec![fx.sh_server("my.srv", "clean"), fx.sh_server("my_srv", "clean")],
            fast(),
        );
        manager.ready().await;
        let dotted = status(&manager, "my.srv");
        let plain = status(&manager, "my_srv");
        let names = |st: &ServerStatus| -> Vec<String> {
            st.tools.iter().map(|t| t.name.clone()).collect()
        };
        // `my.srv` sorts first: it gets the plain names, `my_srv` the suffixed ones.
        assert_eq!(names(&dotted), ["my_srv__hello"]);
        assert_eq!(names(&plain), ["my_srv__crash_2", "my_srv__hello_2"]);
        assert_eq!(
            dotted.notes,
            ["`my_srv__crash` not imported: the name is taken by project ("
                .to_owned()
                + &tool.display().to_string()
                + ")"]
        );
        assert_eq!(plain.notes.len(), 2, "{plain:?}");
        assert!(plain.notes[1].contains("`my_srv__hello` was already taken"));
        let output = fx.call("my_srv__hello_2", json!({"who": "two"})).await;
        assert_eq!(output.results, ToolResults::Text("hello two".into()));
        manager.shutdown().await;
    })
    .await;
}

// ------------------------------------------------------------- HTTP server

#[derive(serde::Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct EchoArgs {
    text: String,
}

#[derive(Clone)]
struct TestServer;

#[tool_router(server_handler)]
impl TestServer {
    #[tool(description = "Echo the text back")]
    async fn echo(&self, Parameters(args): Parameters<EchoArgs>) -> String {
        format!("echo: {}", args.text)
    }

    #[tool(description = "Always fails")]
    async fn fail(&self) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text("it broke, as it always does")])
    }

    #[tool(description = "Answers structured content")]
    async fn measure(&self) -> CallToolResult {
        CallToolResult::structured(json!({"size": 3, "unit": "m"}))
    }

    #[tool(description = "Takes two seconds and says nothing meanwhile")]
    async fn slow(&self) -> String {
        tokio::time::sleep(Duration::from_secs(2)).await;
        "finally".into()
    }

    #[tool(description = "Takes a second, reporting progress every 100 ms")]
    async fn chatty(&self, meta: RequestMetaObject, client: Peer<RoleServer>) -> String {
        let token = meta.get_progress_token();
        for step in 0..10 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if let Some(token) = &token {
                let _ = client
                    .notify_progress(ProgressNotificationParam::new(token.clone(), step as f64))
                    .await;
            }
        }
        "done talking".into()
    }
}

async fn start_test_server() -> (String, CancellationToken) {
    let shutdown = CancellationToken::new();
    let service: StreamableHttpService<TestServer, LocalSessionManager> =
        StreamableHttpService::new(
            || Ok(TestServer),
            Default::default(),
            StreamableHttpServerConfig::default().with_cancellation_token(shutdown.child_token()),
        );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
    });
    (url, shutdown)
}

#[tokio::test]
async fn http_server_calls_errors_timeouts_progress_and_cancellation() {
    bounded(async {
        let fx = Fixture::new().await;
        let (url, shutdown) = start_test_server().await;
        let mut config = server(
            "web",
            TransportConfig::Http {
                url,
                headers: BTreeMap::from([("X-Test".to_owned(), "1".to_owned())]),
                lifecycle: Default::default(),
                oauth: Default::default(),
            },
        );
        config.call_timeout = Duration::from_millis(400);
        let manager = fx.start(vec![config], fast());
        manager.ready().await;
        let st = status(&manager, "web");
        assert_eq!(st.state, ServerState::Running, "{st:?}");
        let names: Vec<&str> = st.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "web__chatty",
                "web__echo",
                "web__fail",
                "web__measure",
                "web__slow"
            ]
        );

        let output = fx.call("web__echo", json!({"text": "hi"})).await;
        assert_eq!(output.results, ToolResults::Text("echo: hi".into()));
        assert!(!output.is_error);

        // The server's schema is enforced before the call leaves.
        let output = fx.call("web__echo", json!({})).await;
        assert_eq!(output.error_code, Some(ErrorCode::InvalidParams));

        let output = fx.call("web__fail", json!({})).await;
        assert!(output.is_error);
        assert_eq!(output.results.to_text(), "it broke, as it always does");

        let output = fx.call("web__measure", json!({})).await;
        assert_eq!(
            output.results.structured(),
            Some(&json!({"size": 3, "unit": "m"}))
        );

        let started = Instant::now();
        let output = fx.call("web__slow", json!({})).await;
        assert_eq!(
            output.error_code,
            Some(ErrorCode::ToolTimeout),
            "{output:?}"
        );
        assert!(started.elapsed() < Duration::from_millis(1500));

        // A second of work, but progress every 100 ms keeps the 400 ms timeout at bay.
        let output = fx.call("web__chatty", json!({})).await;
        assert_eq!(
            output.results,
            ToolResults::Text("done talking".into()),
            "{output:?}"
        );

        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            trigger.cancel();
        });
        let output = fx.call_with("web__chatty", json!({}), cancel).await;
        assert_eq!(output.error_code, Some(ErrorCode::Cancelled));

        manager.shutdown().await;
        shutdown.cancel();
    })
    .await;
}
