//! `satchel telegram` from the command line: what it refuses to start
//! without, and that its token never reaches the output. The bot itself is
//! tested in `crates/satchel-telegram/tests/`.

use serde_json::json;

use crate::support::project::Project;

const TOKEN: &str = "4242:secret-token-never-shown-XYZ";

#[test]
fn the_bot_needs_a_token_and_an_allow_list() {
    let project = Project::new(&json!({}));
    let output = project.satchel(&["telegram"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("TELEGRAM_BOT_TOKEN"), "{stderr}");

    let output = project
        .command(&["telegram", "--api-url", "http://127.0.0.1:1"])
        .env("TELEGRAM_BOT_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("telegram.allowedUsers") && stderr.contains("--allow-user"),
        "{stderr}"
    );
}

#[test]
fn an_unreachable_bot_api_fails_clearly_without_showing_the_token() {
    let project = Project::new(&json!({"telegram": {"allowedUsers": [42]}}));
    let output = project
        .command(&["-v", "telegram", "--api-url", "http://127.0.0.1:1"])
        .env("TELEGRAM_BOT_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("getMe") && stderr.contains("cannot reach the Bot API"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("secret-token"),
        "the token leaked: {stderr}"
    );
}

#[test]
fn unknown_keys_in_the_telegram_section_are_warned_about() {
    let project = Project::new(&json!({"telegram": {"allowedUser": [42]}}));
    let output = project
        .command(&["telegram", "--api-url", "http://127.0.0.1:1"])
        .env("TELEGRAM_BOT_TOKEN", TOKEN)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("did you mean `telegram.allowedUsers`?"),
        "{stderr}"
    );
}
