//! Satchel's client against the reference server, `server-everything`, over
//! streamable HTTP: a server that starts late has its tools added when it
//! answers; its image tool's output arrives as an image; a server killed
//! mid-session keeps its tools listed while calls fail fast, and works
//! again once it is back; a hung call is cut by its timeout.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use satchel_core::{Content, ErrorCode, ToolResults};
use satchel_mcp::ServerState;
use satchel_mcp::client::TransportConfig;
use serde_json::json;

use crate::client::{Fixture, bounded, fast, server, status, wait_until};
use crate::peers_dir::peer;

/// `server-everything streamableHttp` on `port`, in its own process group.
fn everything(port: u16) -> Child {
    use std::os::unix::process::CommandExt;
    Command::new(peer("node_modules/.bin/mcp-server-everything"))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap()
}

/// Stops a server started by [`everything`], its whole process group.
fn kill(mut child: Child) {
    let group = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    let _ = child.wait();
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn a_late_dropped_and_restarted_remote_server_is_followed() {
    bounded(async {
        let fx = Fixture::new().await;
        let port = free_port();
        let mut config = server(
            "everything",
            TransportConfig::Http {
                url: format!("http://127.0.0.1:{port}/mcp"),
                headers: BTreeMap::new(),
                lifecycle: Default::default(),
                oauth: Default::default(),
            },
        );
        config.call_timeout = Duration::from_secs(2);
        let mut options = fast();
        options.restart.max_backoff = Duration::from_millis(500);
        let manager = fx.start(vec![config], options);

        // Nothing listens yet: the manager keeps trying.
        manager.ready().await;
        let st = status(&manager, "everything");
        assert!(
            matches!(st.state, ServerState::Restarting { .. }),
            "{st:?}"
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
        let started = Instant::now();
        let first = everything(port);
        wait_until("the late server's tools", || {
            status(&manager, "everything").state == ServerState::Running
        })
        .await;
        let joined = started.elapsed();
        let names: Vec<String> = status(&manager, "everything")
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect();
        assert!(
            names.contains(&"everything__get-tiny-image".to_owned()),
            "{names:?}"
        );

        let echoed = fx.call("everything__echo", json!({"message": "hi"})).await;
        assert!(!echoed.is_error, "{echoed:?}");
        assert!(echoed.results.to_text().contains("hi"), "{echoed:?}");

        // The image arrives as an image part, not dropped.
        let image = fx.call("everything__get-tiny-image", json!({})).await;
        let ToolResults::Parts(parts) = &image.results else {
            panic!("{image:?}")
        };
        assert!(
            parts.iter().any(
                |part| matches!(part, Content::Image { mime_type, data } if mime_type == "image/png" && !data.is_empty())
            ),
            "{image:?}"
        );

        // A call that outlasts its timeout without progress is cut.
        let cut_at = Instant::now();
        let hung = fx
            .call(
                "everything__trigger-long-running-operation",
                json!({"duration": 30, "steps": 1}),
            )
            .await;
        assert_eq!(hung.error_code, Some(ErrorCode::ToolTimeout), "{hung:?}");
        assert!(cut_at.elapsed() < Duration::from_secs(10));

        // Killed: its tools stay listed, calls fail fast and say why.
        kill(first);
        let failed_at = Instant::now();
        let failed = fx.call("everything__echo", json!({"message": "anyone?"})).await;
        assert!(failed.is_error, "{failed:?}");
        assert!(failed_at.elapsed() < Duration::from_secs(5), "{failed:?}");
        wait_until("the drop is noticed", || {
            matches!(
                status(&manager, "everything").state,
                ServerState::Restarting { .. }
            )
        })
        .await;
        let listed = status(&manager, "everything").tools.len();
        assert_eq!(listed, names.len(), "tools stay listed while it is away");
        let refused = fx.call("everything__echo", json!({"message": "anyone?"})).await;
        assert!(refused.is_error, "{refused:?}");

        // Back on the same address: calls work again.
        let second = everything(port);
        wait_until("the server is back", || {
            status(&manager, "everything").state == ServerState::Running
        })
        .await;
        let echoed = fx.call("everything__echo", json!({"message": "back"})).await;
        assert!(!echoed.is_error, "{echoed:?}");
        manager.shutdown().await;
        kill(second);
        eprintln!("the late server's tools joined {joined:?} after it started");
    })
    .await;
}
