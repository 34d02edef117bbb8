//! Satchel's MCP server, in process: an rmcp client talks to
//! `SatchelServer` over an in-memory duplex pipe (the same framing as
//! stdio) and over streamable HTTP.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use pretty_assertions::assert_eq;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientRequest, Request, ServerResult, Tool,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RoleClient, RunningService};
use rmcp::{ClientHandler, ServiceExt};
use satchel_core::{ToolCall, ToolOutput};
use satchel_mcp::diagnostic::{self, EchoTool};
use satchel_mcp::http::{self, HttpOptions};
use satchel_mcp::server::PolicyLoader;
use satchel_mcp::{McpError, SatchelServer, ServerOptions};
use satchel_tools::external::{SpecCache, ToolDirs};
use satchel_tools::policy::{Mode, Policy};
use satchel_tools::{CallObserver, CallSource, ExternalConfig, LiveRegistry, ToolsConfig};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Every test runs under this bound, so a hang fails instead of stalling.
async fn bounded<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), future)
        .await
        .expect("test took longer than 60 s")
}

#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<(CallSource, String, bool)>>,
    decisions: Mutex<Vec<Option<String>>>,
}

#[async_trait]
impl CallObserver for Recorder {
    async fn on_call(
        &self,
        source: &CallSource,
        call: &ToolCall,
        output: &ToolOutput,
        decision: Option<&str>,
        _started: SystemTime,
        _finished: SystemTime,
    ) -> bool {
        self.decisions
            .lock()
            .unwrap()
            .push(decision.map(str::to_owned));
        self.calls
            .lock()
            .unwrap()
            .push((source.clone(), call.name.clone(), output.is_error));
        true
    }
}

/// A client that counts `tools/list_changed` notifications.
#[derive(Clone, Default)]
struct Client {
    list_changed: Arc<AtomicUsize>,
}

impl ClientHandler for Client {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changed.fetch_add(1, Ordering::SeqCst);
    }
}

struct Fixture {
    dir: tempfile::TempDir,
    live: Arc<LiveRegistry>,
    recorder: Arc<Recorder>,
    policy: PolicyLoader,
}

/// A policy in `mode` with no rules.
fn policy(mode: Mode) -> PolicyLoader {
    let policy = Arc::new(Policy::new(
        Vec::new(),
        mode,
        Vec::new(),
        16,
        Duration::from_secs(10),
    ));
    Arc::new(move || policy.clone())
}

impl Fixture {
    async fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("tools")).unwrap();
        let dirs = ToolDirs {
            project: Some(dir.path().join("tools")),
            user: None,
            system: None,
        };
        let live = LiveRegistry::load_with(
            satchel_builtins::builtin_tools(&satchel_builtins::BuiltinDeps::default()),
            dirs,
            SpecCache::in_memory(),
            ExternalConfig::default(),
        )
        .await
        .unwrap();
        Fixture {
            dir,
            live: Arc::new(live),
            recorder: Arc::new(Recorder::default()),
            policy: policy(Mode::Trust),
        }
    }

    fn server(&self, channel: &str) -> SatchelServer {
        let observer: Arc<dyn CallObserver> = self.recorder.clone();
        SatchelServer::new(
            self.live.clone(),
            ServerOptions {
                channel: channel.into(),
                working_dir: self.dir.path().to_path_buf(),
                config: Arc::new(|| Arc::new(ToolsConfig::default())),
                policy: self.policy.clone(),
                observer: Some(observer),
                resources: None,
                on_session_end: None,
            },
        )
    }

    /// A connected client over a duplex pipe.
    async fn connect(&self) -> (RunningService<RoleClient, Client>, Client) {
        let (server_end, client_end) = tokio::io::duplex(64 * 1024);
        let server = self.server("mcp-test");
        tokio::spawn(async move {
            let running = server.serve(server_end).await.unwrap();
            let _ = running.waiting().await;
        });
        let client = Client::default();
        let running = client.clone().serve(client_end).await.unwrap();
        (running, client)
    }
}

async fn call(
    client: &RunningService<RoleClient, Client>,
    name: &str,
    arguments: Value,
) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    client
        .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(arguments))
        .await
        .unwrap()
}

fn tool<'a>(tools: &'a [Tool], name: &str) -> &'a Tool {
    tools
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

#[tokio::test]
async fn lists_every_tool_with_schemas_and_annotations() {
    bounded(async {
        let fx = Fixture::new().await;
        fx.live
            .set_extra_tools(diagnostic::GROUP, vec![Arc::new(EchoTool::new())])
            .unwrap();
        let (client, _) = fx.connect().await;
        let info = client.peer_info().unwrap();
        assert_eq!(info.server_info.as_ref().unwrap().name, "satchel");
        assert!(info.capabilities.tools.is_some());

        let tools = client.list_all_tools().await.unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(
            names,
            [
                "bash",
                "code",
                "conversation",
                "echo",
                "edit",
                "fetch",
                "glob",
                "grep",
                "memory",
                "process",
                "read",
                "search",
                "skill",
                "write"
            ]
        );
        let bash = serde_json::to_value(tool(&tools, "bash")).unwrap();
        let spec = serde_json::to_value(fx.live.current().get("bash").unwrap().spec()).unwrap();
        for field in ["name", "description", "inputSchema", "annotations"] {
            assert_eq!(bash[field], spec[field], "{field}");
        }
        let echo = serde_json::to_value(tool(&tools, "echo")).unwrap();
        assert_eq!(echo["outputSchema"]["required"], json!(["message"]));
        assert_eq!(echo["annotations"]["readOnlyHint"], true);
    })
    .await;
}

#[tokio::test]
async fn calls_return_text_and_structured_content() {
    bounded(async {
        let fx = Fixture::new().await;
        let (client, _) = fx.connect().await;
        let result = call(&client, "bash", json!({"command": "echo hello"})).await;
        assert_eq!(result.is_error, Some(false));
        let structured = result.structured_content.clone().unwrap();
        assert_eq!(structured["stdout"], "hello\n");
        assert_eq!(structured["exit_code"], 0);
        let text = &result.content[0].as_text().unwrap().text;
        assert_eq!(serde_json::from_str::<Value>(text).unwrap(), structured);

        let calls = fx.recorder.calls.lock().unwrap().clone();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].0.channel, "mcp-test");
        assert!(
            calls[0].0.peer.as_deref().unwrap().starts_with("rmcp"),
            "{calls:?}"
        );
        assert_eq!((calls[0].1.as_str(), calls[0].2), ("bash", false));
    })
    .await;
}

#[tokio::test]
async fn policy_gates_calls_and_nobody_can_consent_over_mcp() {
    bounded(async {
        let mut fx = Fixture::new().await;
        fx.policy = policy(Mode::Workspace);
        fx.live
            .set_extra_tools(diagnostic::GROUP, vec![Arc::new(EchoTool::new())])
            .unwrap();
        let (client, _) = fx.connect().await;
        // bash runs in the sandbox without asking; leaving the sandbox
        // needs consent, which nobody can give here.
        let result = call(&client, "bash", json!({"command": "echo hello"})).await;
        assert_eq!(result.is_error, Some(false), "{result:?}");
        let result = call(
            &client,
            "bash",
            json!({"command": "echo hello", "sandbox": "none", "justification": "test"}),
        )
        .await;
        assert_eq!(result.is_error, Some(true));
        let text = &result.content[0].as_text().unwrap().text;
        assert!(text.contains("PERMISSION_DENIED"), "{text}");
        assert!(text.contains("no one can approve it"), "{text}");
        // A read-only tool runs.
        let result = call(&client, "echo", json!({"message": "hi"})).await;
        assert_eq!(result.is_error, Some(false), "{result:?}");
        let decisions = fx.recorder.decisions.lock().unwrap().clone();
        assert_eq!(decisions.len(), 3);
        assert_eq!(decisions[0].as_deref(), Some("allow by mode default"));
        assert!(
            decisions[1]
                .as_deref()
                .unwrap()
                .contains("ask by mode default; nobody could consent"),
            "{decisions:?}"
        );
        assert!(
            decisions[2].as_deref().unwrap().starts_with("allow"),
            "{decisions:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn failures_are_is_error_results_never_protocol_errors() {
    bounded(async {
        let fx = Fixture::new().await;
        let (client, _) = fx.connect().await;
        for (name, arguments, code) in [
            ("nope", json!({}), "TOOL_NOT_FOUND"),
            (
                "bash",
                json!({"command": "true", "timeout": -1}),
                "INVALID_PARAMS",
            ),
            ("bash", json!({}), "INVALID_PARAMS"),
        ] {
            let result = call(&client, name, arguments).await;
            assert_eq!(result.is_error, Some(true), "{name}");
            let structured = result.structured_content.unwrap();
            assert_eq!(structured["error_code"], code);
            let text = &result.content[0].as_text().unwrap().text;
            assert!(text.contains(code), "{text}");
        }
        // No arguments at all is an empty object, which bash rejects.
        let result = client
            .call_tool(CallToolRequestParams::new("bash"))
            .await
            .unwrap();
        assert_eq!(result.is_error, Some(true));
        assert_eq!(fx.recorder.calls.lock().unwrap().len(), 4);
    })
    .await;
}

#[tokio::test]
async fn registry_changes_notify_the_client() {
    bounded(async {
        let fx = Fixture::new().await;
        let (client, handler) = fx.connect().await;
        // The notifier starts with `notifications/initialized`; a list
        // request is a round trip that follows it.
        client.list_all_tools().await.unwrap();
        fx.live
            .set_extra_tools(diagnostic::GROUP, vec![Arc::new(EchoTool::new())])
            .unwrap();
        let start = Instant::now();
        while handler.list_changed.load(Ordering::SeqCst) == 0 {
            assert!(start.elapsed() < Duration::from_secs(10), "no notification");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let names: Vec<String> = client
            .list_all_tools()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name.into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "bash",
                "code",
                "conversation",
                "echo",
                "edit",
                "fetch",
                "glob",
                "grep",
                "memory",
                "process",
                "read",
                "search",
                "skill",
                "write"
            ]
        );
    })
    .await;
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

async fn read_pid(path: &Path) -> i32 {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && text.ends_with('\n')
        {
            return text.trim().parse().unwrap();
        }
        assert!(start.elapsed() < Duration::from_secs(20), "no pid file");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_cancelled_request_stops_the_process_group() {
    bounded(async {
        let fx = Fixture::new().await;
        let (client, _) = fx.connect().await;
        let pid_file: PathBuf = fx.dir.path().join("pid");
        let command = format!("sleep 1000 & echo $! > {}; wait", pid_file.display());
        let Value::Object(arguments) = json!({"command": command, "timeout": 600}) else {
            unreachable!()
        };
        let handle = client
            .send_cancellable_request(
                ClientRequest::CallToolRequest(Request::new(
                    CallToolRequestParams::new("bash").with_arguments(arguments),
                )),
                PeerRequestOptions::no_options(),
            )
            .await
            .unwrap();
        let sleeper = read_pid(&pid_file).await;
        assert!(!process_gone(sleeper));
        handle.cancel(Some("test".into())).await.unwrap();
        let start = Instant::now();
        while !process_gone(sleeper) {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the background job outlived the cancelled call"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // The session is still usable.
        let result = call(&client, "bash", json!({"command": "echo after"})).await;
        assert_eq!(result.structured_content.unwrap()["stdout"], "after\n");
    })
    .await;
}

/// Posts an `initialize` request with the given headers; returns the status.
async fn post_initialize(url: &str, headers: &[(&str, &str)]) -> u16 {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    })
    .to_string();
    let (host, path) = url
        .strip_prefix("http://")
        .unwrap()
        .split_once('/')
        .unwrap();
    let mut request = format!(
        "POST /{path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("host") {
            request = request.replace(&format!("Host: {host}"), &format!("Host: {value}"));
        } else {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    request.push_str("\r\n");
    request.push_str(&body);
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = vec![0u8; 64];
    let n = stream.read(&mut response).await.unwrap();
    let head = String::from_utf8_lossy(&response[..n]).to_string();
    head.split_whitespace().nth(1).unwrap().parse().unwrap()
}

async fn start_http(fx: &Fixture, options: HttpOptions) -> (String, CancellationToken) {
    let shutdown = CancellationToken::new();
    let bound = http::bind(fx.server("mcp-http"), options, shutdown.clone())
        .await
        .unwrap();
    let url = format!("http://{}{}", bound.local_addr().unwrap(), http::ENDPOINT);
    tokio::spawn(bound.serve());
    (url, shutdown)
}

#[tokio::test]
async fn http_checks_origin_host_and_token() {
    bounded(async {
        let fx = Fixture::new().await;
        let loopback = HttpOptions {
            addr: "127.0.0.1:0".parse().unwrap(),
            token: None,
            allowed_origins: vec!["https://app.example.com".into()],
        };
        let (url, shutdown) = start_http(&fx, loopback.clone()).await;
        let port = url
            .split(':')
            .nth(2)
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .to_owned();
        assert_eq!(post_initialize(&url, &[]).await, 200);
        let local_origin = format!("http://localhost:{port}");
        assert_eq!(
            post_initialize(&url, &[("Origin", &local_origin)]).await,
            200
        );
        assert_eq!(
            post_initialize(&url, &[("Origin", "https://app.example.com")]).await,
            200
        );
        assert_eq!(
            post_initialize(&url, &[("Origin", "http://evil.example.com")]).await,
            403
        );
        assert_eq!(
            post_initialize(&url, &[("Host", "evil.example.com")]).await,
            403
        );
        shutdown.cancel();

        let with_token = HttpOptions {
            token: Some("s3cret".into()),
            ..loopback.clone()
        };
        let (url, shutdown) = start_http(&fx, with_token).await;
        assert_eq!(post_initialize(&url, &[]).await, 401);
        assert_eq!(
            post_initialize(&url, &[("Authorization", "Bearer wrong")]).await,
            401
        );
        assert_eq!(
            post_initialize(&url, &[("Authorization", "Bearer s3cret")]).await,
            200
        );
        shutdown.cancel();

        let exposed = HttpOptions {
            addr: "0.0.0.0:0".parse().unwrap(),
            token: None,
            allowed_origins: vec![],
        };
        let refused = http::bind(fx.server("mcp-http"), exposed, CancellationToken::new()).await;
        assert!(matches!(refused, Err(McpError::TokenRequired { .. })));
    })
    .await;
}

#[tokio::test]
async fn an_rmcp_client_works_over_http() {
    bounded(async {
        let fx = Fixture::new().await;
        let options = HttpOptions {
            addr: "127.0.0.1:0".parse().unwrap(),
            token: Some("tok".into()),
            allowed_origins: vec![],
        };
        let (url, shutdown) = start_http(&fx, options).await;
        satchel_mcp::ensure_crypto_provider();
        let transport = rmcp::transport::StreamableHttpClientTransport::from_config(
            rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                url.as_str(),
            )
            .auth_header("tok"),
        );
        let client = Client::default().serve(transport).await.unwrap();
        let response = client
            .send_request(ClientRequest::CallToolRequest(Request::new(
                CallToolRequestParams::new("bash").with_arguments(
                    json!({"command": "echo over http"})
                        .as_object()
                        .unwrap()
                        .clone(),
                ),
            )))
            .await
            .unwrap();
        let ServerResult::CallToolResult(result) = response else {
            panic!("{response:?}")
        };
        assert_eq!(result.structured_content.unwrap()["stdout"], "over http\n");
        assert_eq!(fx.recorder.calls.lock().unwrap()[0].0.channel, "mcp-http");
        shutdown.cancel();
    })
    .await;
}
