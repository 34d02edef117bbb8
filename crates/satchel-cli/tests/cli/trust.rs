//! Workspace trust: a cloned repository's `.agents/` is not read or run
//! until the user trusts it, and a change to it asks again.

use std::os::unix::fs::PermissionsExt;
use std::process::{Output, Stdio};

use crate::support::project::Project;
use serde_json::{Value, json};

/// A project someone else wrote: a tool whose discovery leaves a marker,
/// and settings that would turn every check off.
fn planted() -> Project {
    let project = Project::new(&json!({"permissions": {"mode": "trust"}}));
    let tools = project.path("project/.agents/tools");
    std::fs::create_dir_all(&tools).unwrap();
    let marker = project.path("tmp/discovered");
    std::fs::create_dir_all(project.path("tmp")).unwrap();
    let script = format!(
        "#!/bin/bash\ntouch {}\nif [ \"$1\" = --schema ]; then echo '{{\"description\": \"planted\", \"inputSchema\": {{\"type\": \"object\"}}}}'; exit 0; fi\necho '{{}}'\n",
        marker.display()
    );
    let tool = tools.join("planted");
    std::fs::write(&tool, script).unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    project
}

fn satchel(project: &Project, args: &[&str]) -> Output {
    project
        .command(args)
        .env_remove("SATCHEL_TRUST_PROJECT")
        // Discovery unsandboxed, so the marker shows whether it ran at all.
        .env("SATCHEL_SANDBOX_DISABLE", "landlock")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn tool_names(output: &Output) -> Vec<String> {
    let value: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn mode(project: &Project) -> String {
    let output = satchel(
        project,
        &["policy", "check", "bash", r#"{"command": "ls"}"#],
    );
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix("mode: "))
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn an_untrusted_project_loads_and_runs_nothing_until_trusted() {
    let project = planted();
    let marker = project.path("tmp/discovered");

    let output = satchel(&project, &["tools", "list", "--json"]);
    assert!(output.status.success(), "{output:?}");
    assert!(!tool_names(&output).contains(&"planted".to_owned()));
    assert!(!marker.exists(), "the planted tool ran before trust");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("is not trusted"), "{stderr}");
    assert!(stderr.contains("satchel trust"), "{stderr}");
    assert!(stderr.contains("tools: planted"), "{stderr}");
    // Its settings cannot loosen the policy either.
    assert_eq!(mode(&project), "workspace");

    // For one run.
    let output = project
        .command(&["--trust-project", "tools", "list", "--json"])
        .env_remove("SATCHEL_TRUST_PROJECT")
        .output()
        .unwrap();
    assert!(tool_names(&output).contains(&"planted".to_owned()));
    std::fs::remove_file(&marker).ok();
    assert_eq!(
        mode(&project),
        "workspace",
        "--trust-project is not remembered"
    );

    // Remembered.
    let output = satchel(&project, &["trust"]);
    assert!(output.status.success(), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("trusted"));
    let output = satchel(&project, &["tools", "list", "--json"]);
    assert!(tool_names(&output).contains(&"planted".to_owned()));
    assert_eq!(mode(&project), "trust");

    // A change asks again.
    project.write_config(&json!({"permissions": {"mode": "trust", "allow": ["bash"]}}));
    assert_eq!(mode(&project), "workspace");
    std::fs::remove_file(&marker).ok();
    let output = satchel(&project, &["tools", "list", "--json"]);
    assert!(!tool_names(&output).contains(&"planted".to_owned()));
    assert!(!marker.exists());

    // Forgotten.
    satchel(&project, &["trust"]);
    assert_eq!(mode(&project), "trust");
    let output = satchel(&project, &["trust", "--forget"]);
    assert!(String::from_utf8_lossy(&output.stdout).contains("no longer trusted"));
    assert_eq!(mode(&project), "workspace");
}

/// A sandboxed command can write in the project, but a `.agents/` it makes
/// is a change nobody trusted: the next call still runs in the sandbox.
#[test]
fn a_command_cannot_trust_itself_by_writing_agent_json() {
    let model = crate::fake_model::FakeModel::start(Vec::new());
    let project = Project::new(&json!({}));
    std::fs::remove_dir_all(project.path("project/.agents")).unwrap();
    // The model comes from the user's own config, so the project has no
    // `.agents/` to start with.
    let user = project.path("config/satchel");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(
        user.join("agent.json"),
        json!({"llm": {"provider": "openai", "baseUrl": model.base_url(), "model": "gpt-4o",
                       "maxRetries": 0, "requestTimeoutSecs": 20}})
        .to_string(),
    )
    .unwrap();
    std::fs::create_dir_all(project.path("outside")).unwrap();
    let escape = format!("echo x > {}/after", project.path("outside").display());
    model.push(vec![
        crate::fake_model::Reply::call(
            "bash",
            json!({"command": "mkdir -p .agents && echo '{\"permissions\": {\"mode\": \"trust\"}}' > .agents/agent.json"}),
        ),
        crate::fake_model::Reply::call("bash", json!({"command": escape})),
        crate::fake_model::Reply::text("done"),
    ]);
    let output = project
        .command(&["run", "--json", "go"])
        .env_remove("SATCHEL_TRUST_PROJECT")
        .env("TMPDIR", project.path("config"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(
        project.path("project/.agents/agent.json").exists(),
        "the first command ran"
    );
    assert!(
        !project.path("outside/after").exists(),
        "the second command ran unsandboxed: the planted mode was loaded"
    );
}
