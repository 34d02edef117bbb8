//! Policy decisions as a user configures them: rules in agent.json layers,
//! bash commands hidden every way bash allows, modes, refusals.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

use std::path::PathBuf;

use pretty_assertions::assert_eq;
use satchel_builtins::builtin_registry;
use satchel_core::{ErrorCode, ToolAnnotations, ToolSpec};
use satchel_tools::Settings;
use satchel_tools::policy::{Decision, Policy, Verdict};
use serde_json::{Value, json};

fn policy(config: Value) -> Policy {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let (policy, warnings) = Policy::from_settings(&Settings::load(&[path]).unwrap()).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    policy
}

fn bash_spec() -> ToolSpec {
    builtin_registry()
        .unwrap()
        .get("bash")
        .unwrap()
        .spec()
        .clone()
}

fn bash(policy: &Policy, command: &str) -> Decision {
    policy.decide(&bash_spec(), &json!({"command": command}))
}

fn tool(name: &str, annotations: ToolAnnotations) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        title: None,
        description: String::new(),
        input_schema: json!({"type": "object"}),
        output_schema: None,
        annotations,
        capabilities: Default::default(),
    }
}

fn read_only() -> ToolAnnotations {
    ToolAnnotations {
        read_only_hint: Some(true),
        ..Default::default()
    }
}

#[test]
fn every_composition_form_exposes_a_denied_command() {
    let policy = policy(
        json!({"permissions": {"allow": ["bash(echo *)", "bash(ls*)", "bash(true)", "bash(cat*)", "bash(xargs*)", "bash(env*)", "bash(sh*)", "bash(bash*)", "bash(find*)", "bash(timeout*)", "bash(sudo*)", "bash(eval*)"], "deny": ["bash(rm *)"]}}),
    );
    let hidden = [
        "ls && rm -rf /",
        "ls; rm -rf /",
        "ls || rm -rf /",
        "ls | rm -rf /",
        "ls\nrm -rf /",
        "ls & rm -rf /",
        "echo $(rm -rf /)",
        "echo \"$(rm -rf /)\"",
        "echo `rm -rf /`",
        "(rm -rf /)",
        "{ rm -rf /; }",
        "bash -c 'rm -rf /'",
        "sh -c \"ls; rm -rf /\"",
        "env X=1 rm -rf /",
        "sudo rm -rf /",
        "timeout 5 rm -rf /",
        "find . | xargs rm",
        "eval 'rm -rf /'",
        "cat <(rm -rf /)",
        "if true; then rm -rf /; fi",
        "for x in 1; do rm -rf /; done",
        "f() { rm -rf /; }",
        "ls > \"$(rm -rf /)\"",
        "X=$(rm -rf /) ls",
        "bash -c \"bash -c 'rm -rf /'\"",
    ];
    for command in hidden {
        let decision = bash(&policy, command);
        assert_eq!(
            decision.verdict,
            Verdict::Deny,
            "{command:?} got through: {decision:?}"
        );
        assert_eq!(
            decision.rule_label(),
            "deny rule `bash(rm *)`",
            "{command:?}"
        );
    }
    assert_eq!(bash(&policy, "ls -la && echo done").verdict, Verdict::Allow);
}

#[test]
fn quoting_tricks_do_not_hide_a_command() {
    let denying = policy(json!({"permissions": {"deny": ["bash(rm *)", "bash(curl*)"]}}));
    for command in [
        "r''m -rf /",
        "\\rm -rf /",
        "'rm' -rf /",
        "\"r\"m -rf /",
        "/bin/rm -rf /",
        "r\\m x",
        "c'u'rl evil.sh",
    ] {
        assert_eq!(
            bash(&denying, command).verdict,
            Verdict::Deny,
            "{command:?}"
        );
    }
    // What only the running shell could know is never allowed silently
    // where a deny or ask rule might match what it hides...
    let trusting = policy(json!({"permissions": {"allow": ["bash(*)"], "deny": ["bash(rm *)"]}}));
    let plain = policy(json!({}));
    for command in [
        "$CMD -rf /",
        "$(echo rm) -rf /",
        "eval \"$X\"",
        "bash -c \"$S\"",
        "if then",
    ] {
        assert_eq!(
            bash(&trusting, command).verdict,
            Verdict::Ask,
            "{command:?}"
        );
        // ...and where none could, the sandbox contains it.
        assert_eq!(bash(&plain, command).verdict, Verdict::Allow, "{command:?}");
    }
}

#[test]
fn deny_beats_ask_beats_allow_whatever_the_order_written() {
    let policy = policy(json!({"permissions": {
        "allow": ["bash(git *)", "memory"],
        "ask": ["bash(git push*)"],
        "deny": ["bash(git push --force*)", "memory"]
    }}));
    assert_eq!(bash(&policy, "git status").verdict, Verdict::Allow);
    assert_eq!(bash(&policy, "git push origin main").verdict, Verdict::Ask);
    assert_eq!(
        bash(&policy, "git push --force origin main").verdict,
        Verdict::Deny
    );
    assert_eq!(
        policy
            .decide(&tool("memory", read_only()), &json!({}))
            .verdict,
        Verdict::Deny
    );
    // The strictest command of a script decides.
    let decision = bash(&policy, "git status; git push origin main");
    assert_eq!(decision.verdict, Verdict::Ask);
    assert_eq!(decision.deciding().unwrap().subject, "git push origin main");
}

#[test]
fn mode_defaults_follow_the_annotations() {
    let default = policy(json!({}));
    let destructive = tool(
        "shred",
        ToolAnnotations {
            read_only_hint: Some(false),
            destructive_hint: Some(true),
            ..Default::default()
        },
    );
    let closed = tool(
        "note",
        ToolAnnotations {
            read_only_hint: Some(false),
            destructive_hint: Some(false),
            open_world_hint: Some(false),
            ..Default::default()
        },
    );
    let unannotated = tool("mystery", ToolAnnotations::default());
    assert_eq!(
        default
            .decide(&tool("look", read_only()), &json!({}))
            .verdict,
        Verdict::Allow
    );
    assert_eq!(
        default.decide(&destructive, &json!({})).verdict,
        Verdict::Ask
    );
    assert_eq!(default.decide(&closed, &json!({})).verdict, Verdict::Allow);
    assert_eq!(
        default.decide(&unannotated, &json!({})).verdict,
        Verdict::Ask
    );
    // Commands run in the sandbox without asking; leaving it asks, unless
    // a rule allows the command.
    assert_eq!(bash(&default, "ls").verdict, Verdict::Allow);
    assert_eq!(bash(&default, "rm -rf build").verdict, Verdict::Allow);
    let out = json!({"command": "ls", "sandbox": "none", "justification": "needs ~/.cache"});
    let leaving = default.decide(&bash_spec(), &out);
    assert_eq!(leaving.verdict, Verdict::Ask);
    assert!(
        leaving
            .explanation()
            .contains("outside the `workspace` sandbox (\"needs ~/.cache\")"),
        "{}",
        leaving.explanation()
    );
    let allowing = policy(json!({"permissions": {"allow": ["bash(ls*)"]}}));
    assert_eq!(allowing.decide(&bash_spec(), &out).verdict, Verdict::Allow);

    let readonly = policy(json!({"permissions": {"mode": "readonly", "allow": ["bash(ls*)"]}}));
    assert_eq!(
        readonly.decide(&destructive, &json!({})).verdict,
        Verdict::Deny
    );
    assert_eq!(
        readonly
            .decide(&tool("look", read_only()), &json!({}))
            .verdict,
        Verdict::Allow
    );
    assert_eq!(
        bash(&readonly, "ls -la").verdict,
        Verdict::Allow,
        "rules still apply in readonly mode"
    );
    // Contained by the read-only sandbox.
    assert_eq!(bash(&readonly, "touch x").verdict, Verdict::Allow);

    let trust = policy(json!({"permissions": {"mode": "trust", "deny": ["bash(rm *)"]}}));
    assert_eq!(
        trust.decide(&destructive, &json!({})).verdict,
        Verdict::Allow
    );
    assert_eq!(
        bash(&trust, "rm x").verdict,
        Verdict::Deny,
        "deny rules hold in trust mode"
    );
}

#[test]
fn tool_name_patterns_cover_mcp_servers() {
    let policy = policy(json!({"permissions": {"deny": ["mcp_github__*"], "allow": ["mcp_*"]}}));
    let spec = |name: &str| tool(name, ToolAnnotations::default());
    assert_eq!(
        policy
            .decide(&spec("mcp_github__delete_repo"), &json!({}))
            .verdict,
        Verdict::Deny
    );
    assert_eq!(
        policy.decide(&spec("mcp_fs__read"), &json!({})).verdict,
        Verdict::Allow
    );
}

#[test]
fn rules_add_up_across_files_and_remember_where_they_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let user = dir.path().join("user.json");
    let project = dir.path().join("project.json");
    std::fs::write(&user, r#"{"permissions": {"deny": ["bash(rm *)"]}}"#).unwrap();
    std::fs::write(&project, r#"{"permissions": {"allow": ["bash(*)"], "deny": ["bash(shutdown*)"]}, "rateLimits": {"search": "often"}}"#).unwrap();
    let (policy, warnings) =
        Policy::from_settings(&Settings::load(&[user.clone(), project.clone()]).unwrap()).unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(&format!("{}:1:", project.display()))
            && warnings[0].contains("rateLimits.search"),
        "{warnings:?}"
    );
    let decision = bash(&policy, "rm -rf /");
    assert_eq!(
        decision.verdict,
        Verdict::Deny,
        "the user's deny survives the project's allow"
    );
    assert_eq!(
        decision.deciding().unwrap().rule.as_ref().unwrap().origin,
        Some(PathBuf::from(&user))
    );
    assert_eq!(bash(&policy, "shutdown now").verdict, Verdict::Deny);
}

/// Issue #30: a rule that does not parse, a mistyped key or a wrong type in
/// `permissions` used to be a warning, and the deny rules it meant were
/// gone. Now the whole configuration is refused, naming where.
#[test]
fn a_broken_permissions_section_is_an_error_not_a_lost_rule() {
    let dir = tempfile::tempdir().unwrap();
    let user = dir.path().join("user.json");
    let project = dir.path().join("project.json");
    std::fs::write(&user, r#"{"permissions": {"deny": ["bash(rm *)"]}}"#).unwrap();
    for (text, expected) in [
        (
            r#"{"permissions": {"deny": ["bash(shutdown*)", "bash(oops"]}}"#,
            "1:46: `permissions.deny[1]`: rule `bash(oops` opens a parenthesis it does not close",
        ),
        (
            r#"{"permissions": {"denny": ["bash(curl*)"]}}"#,
            "1:18: `denny` is not a key of `permissions`; did you mean `deny`?",
        ),
        (
            r#"{"permissions": {"deny": "bash"}}"#,
            "1:18: `permissions.deny` must be a list of rules",
        ),
    ] {
        std::fs::write(&project, text).unwrap();
        let error = Settings::load(&[user.clone(), project.clone()]).unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with(&format!("{}:{expected}", project.display())),
            "{message}"
        );
        // Settings built without the loader's check are refused the same way.
        let layers = vec![(
            project.clone(),
            serde_json::from_str::<Value>(text)
                .unwrap()
                .as_object()
                .unwrap()
                .clone(),
        )];
        let unchecked = Settings::from_layers(layers);
        assert!(Policy::from_settings(&unchecked).is_err(), "{text}");
    }
}

#[test]
fn refusals_tell_the_model_what_and_why() {
    let policy = policy(json!({"permissions": {"deny": ["bash(rm *)"]}}));
    let out = bash(&policy, "ls; rm -rf build").refusal();
    assert_eq!(out.error_code, Some(ErrorCode::PermissionDenied));
    let body = out.results.structured().unwrap();
    let message = body["error"].as_str().unwrap();
    assert!(
        message.starts_with("Permission denied: `rm -rf build` matches the deny rule `bash(rm *)`"),
        "{message}"
    );
    assert_eq!(body["rule"], "deny rule `bash(rm *)`");

    let out = policy
        .decide(
            &bash_spec(),
            &json!({"command": "npm install", "sandbox": "none"}),
        )
        .refusal();
    let message = out.results.structured().unwrap()["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("needs the user's approval"), "{message}");
    assert!(
        message.contains("outside the `workspace` sandbox"),
        "{message}"
    );
}

#[tokio::test]
async fn rate_limits_refuse_with_the_time_to_wait() {
    let policy = policy(
        json!({"rateLimits": {"bash": "2/min"}, "maxConcurrentProcesses": 1, "processWaitMs": 50}),
    );
    let spec = bash_spec();
    let t0 = std::time::Instant::now();
    let first = policy.admit(&spec, true, t0).await.unwrap();
    // The process cap: one slot, held by the first call.
    let out = policy
        .admit(&spec, true, t0 + std::time::Duration::from_secs(1))
        .await
        .unwrap_err();
    assert_eq!(out.error_code, Some(ErrorCode::RateLimited));
    drop(first);
    // A call refused for the cap did not count against the rate limit.
    let second = policy
        .admit(&spec, true, t0 + std::time::Duration::from_secs(2))
        .await
        .unwrap();
    drop(second);
    let out = policy
        .admit(&spec, true, t0 + std::time::Duration::from_secs(3))
        .await
        .unwrap_err();
    let body = out.results.structured().unwrap();
    assert_eq!(
        body["error"],
        "`bash` is over its rate limit; retry in 57 s or do without it"
    );
    assert_eq!(body["retry_after_secs"], 57.0);
}

mod dispatching {
    use std::sync::{Arc, Mutex};

    use async_trait::async_trait;
    use satchel_core::ToolCall;
    use satchel_tools::{
        Consent, ConsentAnswer, NonInteractive, RememberingConsent, ToolContext, ToolsConfig,
        UserInitiated, dispatch,
    };

    use super::{Decision, ErrorCode, builtin_registry, json, policy};
    use pretty_assertions::assert_eq;

    /// Answers from a script and counts how often it was asked.
    struct Scripted {
        answers: Mutex<Vec<ConsentAnswer>>,
        asked: Arc<Mutex<usize>>,
    }

    #[async_trait]
    impl Consent for Scripted {
        async fn ask(&self, _call: &ToolCall, _decision: &Decision) -> ConsentAnswer {
            *self.asked.lock().unwrap() += 1;
            self.answers.lock().unwrap().remove(0)
        }
    }

    fn call(command: &str) -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: "bash".into(),
            input: json!({"command": command}),
        }
    }

    /// A call that asks to leave the sandbox.
    fn call_out(command: &str) -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: "bash".into(),
            input: json!({"command": command, "sandbox": "none", "justification": "a test"}),
        }
    }

    fn ctx() -> ToolContext {
        ToolContext::standalone("c1", std::env::temp_dir(), Arc::new(ToolsConfig::default()))
    }

    #[tokio::test]
    async fn consent_answers_shape_the_outcome_and_the_record() {
        let registry = builtin_registry().unwrap();
        let policy =
            policy(json!({"permissions": {"allow": ["bash(true)"], "deny": ["bash(rm *)"]}}));
        let asked = Arc::new(Mutex::new(0));
        let consent = RememberingConsent::new(Scripted {
            answers: Mutex::new(vec![
                ConsentAnswer::AllowForConversation,
                ConsentAnswer::Deny {
                    reason: Some("not on my laptop".into()),
                },
            ]),
            asked: asked.clone(),
        });

        let allowed = dispatch(&registry, &policy, &consent, &call("true"), &ctx()).await;
        assert!(!allowed.output.is_error);
        assert_eq!(
            allowed.decision_label().unwrap(),
            "allow by allow rule `bash(true)`"
        );
        assert_eq!(*asked.lock().unwrap(), 0);

        let contained = dispatch(&registry, &policy, &consent, &call("echo in"), &ctx()).await;
        let fields = contained.output.results.structured().unwrap();
        assert_eq!(fields["stdout"], "in\n");
        assert_eq!(fields["sandbox"], "workspace");
        assert_eq!(contained.decision_label().unwrap(), "allow by mode default");
        assert_eq!(*asked.lock().unwrap(), 0);

        let first = dispatch(&registry, &policy, &consent, &call_out("echo hi"), &ctx()).await;
        assert_eq!(first.output.results.structured().unwrap()["stdout"], "hi\n");
        assert_eq!(
            first.output.results.structured().unwrap()["sandbox"],
            "none"
        );
        assert_eq!(
            first.decision_label().unwrap(),
            "ask by mode default; user allowed for the conversation"
        );
        // Remembered: the same command runs again without asking.
        let again = dispatch(&registry, &policy, &consent, &call_out("echo hi"), &ctx()).await;
        assert!(!again.output.is_error);
        assert_eq!(*asked.lock().unwrap(), 1);

        let refused = dispatch(
            &registry,
            &policy,
            &consent,
            &call_out("touch /tmp/x"),
            &ctx(),
        )
        .await;
        assert_eq!(refused.output.error_code, Some(ErrorCode::PermissionDenied));
        assert_eq!(
            refused.output.results.structured().unwrap()["error"],
            "The user refused this call: not on my laptop. Do not retry it; adapt to their answer."
        );
        assert_eq!(
            refused.decision_label().unwrap(),
            "ask by mode default; user refused: not on my laptop"
        );

        let denied = dispatch(&registry, &policy, &consent, &call("rm -rf /"), &ctx()).await;
        assert_eq!(denied.output.error_code, Some(ErrorCode::PermissionDenied));
        assert_eq!(
            denied.decision_label().unwrap(),
            "deny by deny rule `bash(rm *)`"
        );
        assert_eq!(*asked.lock().unwrap(), 2, "a denied call never asks");
    }

    #[tokio::test]
    async fn non_interactive_refuses_what_needs_consent_and_user_calls_run_it() {
        let registry = builtin_registry().unwrap();
        let policy = policy(json!({"permissions": {"deny": ["bash(rm *)"]}}));
        let contained = dispatch(
            &registry,
            &policy,
            &NonInteractive,
            &call("echo hi"),
            &ctx(),
        )
        .await;
        assert!(!contained.output.is_error, "{:?}", contained.output);
        let refused = dispatch(
            &registry,
            &policy,
            &NonInteractive,
            &call_out("echo hi"),
            &ctx(),
        )
        .await;
        assert_eq!(refused.output.error_code, Some(ErrorCode::PermissionDenied));
        let ran = dispatch(
            &registry,
            &policy,
            &UserInitiated,
            &call_out("echo hi"),
            &ctx(),
        )
        .await;
        assert!(!ran.output.is_error);
        let denied = dispatch(
            &registry,
            &policy,
            &UserInitiated,
            &call("rm -rf /nothing"),
            &ctx(),
        )
        .await;
        assert_eq!(denied.output.error_code, Some(ErrorCode::PermissionDenied));
    }

    #[tokio::test]
    async fn invalid_input_never_reaches_policy() {
        let registry = builtin_registry().unwrap();
        let policy = policy(json!({}));
        let bad = ToolCall {
            id: "c".into(),
            name: "bash".into(),
            input: json!({}),
        };
        let out = dispatch(&registry, &policy, &NonInteractive, &bad, &ctx()).await;
        assert_eq!(out.output.error_code, Some(ErrorCode::InvalidParams));
        assert!(out.decision.is_none());
    }
}

fn builtin_spec(name: &str) -> ToolSpec {
    builtin_registry()
        .unwrap()
        .get(name)
        .unwrap()
        .spec()
        .clone()
}

/// The file tools' rules take paths; `write` and `edit` run without
/// asking in `workspace` (they confine themselves) and never in
/// `readonly`.
#[test]
fn file_tools_take_path_rules_and_follow_the_mode() {
    let rules = policy(json!({"permissions": {
        "deny": ["read(*.env)", "edit(migrations/**)"],
        "ask": ["write(docs/*)"]
    }}));
    let read = builtin_spec("read");
    let edit = builtin_spec("edit");
    let write = builtin_spec("write");
    for path in ["prod.env", "./prod.env", "/home/me/project/config/prod.env"] {
        let decision = rules.decide(&read, &json!({"file_path": path}));
        assert_eq!(decision.verdict, Verdict::Deny, "{path}");
        assert_eq!(decision.rule_label(), "deny rule `read(*.env)`");
    }
    assert_eq!(
        rules
            .decide(&read, &json!({"file_path": "src/main.rs"}))
            .verdict,
        Verdict::Allow
    );
    assert_eq!(
        rules
            .decide(
                &edit,
                &json!({"file_path": "migrations/001.sql", "old_string": "a", "new_string": "b"})
            )
            .verdict,
        Verdict::Deny
    );
    assert_eq!(
        rules
            .decide(&write, &json!({"file_path": "docs/a.md", "content": ""}))
            .verdict,
        Verdict::Ask
    );
    assert_eq!(
        rules
            .decide(&write, &json!({"file_path": "src/a.rs", "content": ""}))
            .verdict,
        Verdict::Allow
    );
    let readonly = policy(json!({"permissions": {"mode": "readonly"}}));
    assert_eq!(
        readonly
            .decide(&write, &json!({"file_path": "a", "content": ""}))
            .verdict,
        Verdict::Deny
    );
    assert_eq!(
        readonly.decide(&read, &json!({"file_path": "a"})).verdict,
        Verdict::Allow
    );
    let wrong = satchel_tools::policy::Rule::parse(
        satchel_tools::policy::RuleKind::Deny,
        "memory(x)",
        None,
    );
    assert!(wrong.unwrap_err().contains("a path pattern"));
}

/// Typing into a background shell is judged by the `bash(...)` rules that
/// deny or ask: `process` `input` cannot run what `bash` may not.
#[test]
fn text_typed_into_a_background_process_meets_bash_deny_and_ask_rules() {
    let process = builtin_registry()
        .unwrap()
        .get("process")
        .unwrap()
        .spec()
        .clone();
    let rules = policy(json!({"permissions": {
        "mode": "trust",
        "allow": ["bash(git *)", "process"],
        "deny": ["bash(rm *)"],
        "ask": ["bash(git push*)"]
    }}));
    let typed = |text: &str| {
        rules.decide(
            &process,
            &json!({"action": "input", "process_id": "p1", "text": text}),
        )
    };
    let denied = typed("ls\nrm -rf ~/work\n");
    assert_eq!(denied.verdict, Verdict::Deny, "{denied:?}");
    assert!(
        denied
            .judgements
            .iter()
            .any(|j| j.subject.contains("rm -rf ~/work")),
        "{denied:?}"
    );
    assert_eq!(typed("echo $(rm -r x)\n").verdict, Verdict::Deny);
    assert_eq!(typed("git push origin main\n").verdict, Verdict::Ask);
    // Allow rules for bash do not widen what `process` may do, and text
    // for another program (Python here) keeps the process tool's verdict.
    assert_eq!(typed("git status\n").verdict, Verdict::Allow);
    assert_eq!(typed("print([1, 2])\n").verdict, Verdict::Allow);
    assert_eq!(typed("\u{3}").verdict, Verdict::Allow);
    // Text beyond what can be read is asked about, not waved through.
    let nested = format!("{}ls{}", "$(".repeat(200), ")".repeat(200));
    assert_eq!(typed(&nested).verdict, Verdict::Ask);
    // Reading output is not typing.
    assert_eq!(
        rules
            .decide(
                &process,
                &json!({"action": "output", "process_id": "p1", "text": "rm -rf /"})
            )
            .verdict,
        Verdict::Allow
    );
}
