//! The file tools (`read`, `write`, `edit`, `glob`, `grep`) through the
//! registry, as a model calls them, in a conversation, in the `workspace`
//! mode with the project as the only writable path.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pretty_assertions::assert_eq;
use satchel_builtins::{BuiltinDeps, builtin_tools};
use satchel_core::{Content, ErrorCode, ToolCall, ToolOutput, ToolResults};
use satchel_tools::sandbox::Confinement;
use satchel_tools::{Registry, ToolContext, ToolsConfig};
use serde_json::{Value, json};

/// A project directory beside an `outside` one, and the tools.
pub(crate) struct Files {
    _dir: tempfile::TempDir,
    project: PathBuf,
    outside: PathBuf,
    registry: Registry,
}

impl Files {
    pub(crate) fn new() -> Files {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let mut registry = Registry::new();
        for tool in builtin_tools(&BuiltinDeps::default()) {
            registry.register_arc(tool).unwrap();
        }
        Files {
            _dir: dir,
            project,
            outside,
            registry,
        }
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.project.join(name)
    }

    pub(crate) fn ctx(&self, confinement: Confinement, conversation: Option<&str>) -> ToolContext {
        let mut ctx = ToolContext::standalone(
            "call",
            self.project.clone(),
            Arc::new(ToolsConfig::default()),
        );
        ctx.confinement = confinement;
        ctx.conversation_id = conversation.map(str::to_owned);
        ctx.writable_roots = Some(Arc::from(vec![self.project.clone()]));
        ctx
    }

    pub(crate) async fn call_in(&self, ctx: &ToolContext, name: &str, input: Value) -> ToolOutput {
        let call = ToolCall {
            id: "call".into(),
            name: name.into(),
            input,
        };
        self.registry.call(&call, ctx).await
    }

    /// A call in conversation `c1`, in the `workspace` mode.
    pub(crate) async fn call(&self, name: &str, input: Value) -> ToolOutput {
        self.call_in(&self.ctx(Confinement::Workspace, Some("c1")), name, input)
            .await
    }
}

pub(crate) fn text(output: &ToolOutput) -> String {
    output.results.to_text()
}

pub(crate) fn error(output: &ToolOutput) -> String {
    assert!(output.is_error, "expected an error: {output:?}");
    output.results.structured().unwrap()["error"]
        .as_str()
        .unwrap()
        .to_owned()
}

pub(crate) fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn edits_keep_crlf_bom_tabs_non_ascii_and_a_missing_final_newline() {
    let files = Files::new();
    let path = files.path("win.txt");
    std::fs::write(&path, "\u{feff}first\r\n\tcafé = 1;\r\nlast".as_bytes()).unwrap();
    let out = files
        .call(
            "edit",
            json!({"file_path": "win.txt", "old_string": "\tcafé = 1;\nlast", "new_string": "\tcafé = 2; // ☕\nlast"}),
        )
        .await;
    assert!(!out.is_error, "{out:?}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        "\u{feff}first\r\n\tcafé = 2; // ☕\r\nlast".as_bytes()
    );
    let diff = out.results.structured().unwrap()["diff"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(diff.contains("@@ -1,3 +1,3 @@"), "{diff}");
    assert!(
        diff.contains("-\tcafé = 1;\n+\tcafé = 2; // ☕\n"),
        "{diff}"
    );
}

#[tokio::test]
async fn zero_and_two_matches_leave_the_file_untouched_and_name_the_lines() {
    let files = Files::new();
    let path = files.path("a.rs");
    let original = "fn main() {\n    let x = 1;\n    let y = 2;\n    let x = 1;\n}\n";
    std::fs::write(&path, original).unwrap();
    let two = files
        .call(
            "edit",
            json!({"file_path": "a.rs", "old_string": "let x = 1;", "new_string": "let x = 3;"}),
        )
        .await;
    let message = error(&two);
    assert!(message.contains("2 times, at lines 2, 4"), "{message}");
    assert_eq!(two.results.structured().unwrap()["lines"], json!([2, 4]));
    assert_eq!(two.error_code, Some(ErrorCode::InvalidParams));
    let none = files
        .call(
            "edit",
            json!({"file_path": "a.rs", "old_string": "let z = 2;", "new_string": "let z = 3;"}),
        )
        .await;
    let message = error(&none);
    assert!(message.contains("not found"), "{message}");
    assert!(message.contains("line 3"), "{message}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
    let all = files
        .call(
            "edit",
            json!({"file_path": "a.rs", "old_string": "let x = 1;", "new_string": "let x = 3;", "replace_all": true}),
        )
        .await;
    assert_eq!(all.results.structured().unwrap()["replacements"], json!(2));
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        original.replace("let x = 1;", "let x = 3;")
    );
}

#[tokio::test]
async fn a_multi_edit_whose_third_edit_fails_changes_nothing() {
    let files = Files::new();
    let path = files.path("m.txt");
    std::fs::write(&path, "alpha\nbeta\ngamma\n").unwrap();
    let out = files
        .call(
            "edit",
            json!({"file_path": "m.txt", "edits": [
                {"old_string": "alpha", "new_string": "ALPHA"},
                {"old_string": "beta", "new_string": "BETA"},
                {"old_string": "delta", "new_string": "DELTA"}
            ]}),
        )
        .await;
    let message = error(&out);
    assert!(message.starts_with("edit 3 of 3:"), "{message}");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "alpha\nbeta\ngamma\n"
    );
    let both = files
        .call(
            "edit",
            json!({"file_path": "m.txt", "edits": [
                {"old_string": "alpha", "new_string": "ALPHA"},
                {"old_string": "ALPHA\nbeta", "new_string": "AB"}
            ]}),
        )
        .await;
    assert!(!both.is_error, "{both:?}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "AB\ngamma\n");
    let mixed = files
        .call(
            "edit",
            json!({"file_path": "m.txt", "old_string": "AB", "new_string": "x", "edits": [{"old_string": "a", "new_string": "b"}]}),
        )
        .await;
    assert!(error(&mixed).contains("not both"));
}

#[tokio::test]
async fn an_executable_keeps_its_mode_through_edit_and_write() {
    let files = Files::new();
    let path = files.path("run.sh");
    std::fs::write(&path, "#!/bin/sh\necho one\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = files
        .call(
            "edit",
            json!({"file_path": "run.sh", "old_string": "one", "new_string": "two"}),
        )
        .await;
    assert!(!out.is_error, "{out:?}");
    assert_eq!(mode(&path), 0o755);
    let out = files
        .call(
            "write",
            json!({"file_path": "run.sh", "content": "#!/bin/sh\necho three\n"}),
        )
        .await;
    assert!(!out.is_error, "{out:?}");
    assert_eq!(mode(&path), 0o755);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "#!/bin/sh\necho three\n"
    );
}

#[tokio::test]
async fn writes_outside_the_project_and_into_protected_paths_are_refused() {
    let files = Files::new();
    std::os::unix::fs::symlink(&files.outside, files.path("planted")).unwrap();
    std::fs::create_dir_all(files.path(".git/hooks")).unwrap();
    std::fs::create_dir_all(files.path(".agents")).unwrap();
    let absolute = files.outside.join("abs.txt");
    for target in [
        absolute.to_str().unwrap(),
        "../outside/dotdot.txt",
        "planted/through-symlink.txt",
        ".agents/agent.json",
        ".git/hooks/pre-commit",
        ".git/config",
    ] {
        let out = files
            .call("write", json!({"file_path": target, "content": "x"}))
            .await;
        assert_eq!(
            out.error_code,
            Some(ErrorCode::PermissionDenied),
            "{target}: {out:?}"
        );
    }
    assert_eq!(std::fs::read_dir(&files.outside).unwrap().count(), 0);
    assert!(!files.path(".agents/agent.json").exists());
    let ok = files
        .call(
            "write",
            json!({"file_path": "deep/new/file.txt", "content": "made\n"}),
        )
        .await;
    assert!(!ok.is_error, "{ok:?}");
    assert_eq!(
        std::fs::read_to_string(files.path("deep/new/file.txt")).unwrap(),
        "made\n"
    );

    let readonly = files.ctx(Confinement::ReadOnly, Some("c1"));
    for (tool, input) in [
        ("write", json!({"file_path": "other.txt", "content": "x"})),
        (
            "edit",
            json!({"file_path": "deep/new/file.txt", "old_string": "made", "new_string": "x"}),
        ),
    ] {
        let out = files.call_in(&readonly, tool, input).await;
        assert!(error(&out).contains("readonly"), "{out:?}");
    }
    assert!(!files.path("other.txt").exists());
}

#[tokio::test]
async fn a_file_changed_since_it_was_read_is_not_edited_or_replaced() {
    let files = Files::new();
    let path = files.path("notes.txt");
    std::fs::write(&path, "one\ntwo\n").unwrap();
    // Replacing a file never read is refused; reading it first allows it.
    let blind = files
        .call("write", json!({"file_path": "notes.txt", "content": "x\n"}))
        .await;
    assert!(error(&blind).contains("has not been read"), "{blind:?}");
    let read = files.call("read", json!({"file_path": "notes.txt"})).await;
    assert!(!read.is_error);
    // Someone else changes it.
    std::fs::write(&path, "one\nTWO\n").unwrap();
    let stale = files
        .call(
            "edit",
            json!({"file_path": "notes.txt", "old_string": "one", "new_string": "1"}),
        )
        .await;
    assert!(error(&stale).contains("changed on disk"), "{stale:?}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\nTWO\n");
    // Read again: the edit goes through, and a later one too (its own
    // write counts as seen).
    files.call("read", json!({"file_path": "notes.txt"})).await;
    for (old, new) in [("one", "1"), ("TWO", "2")] {
        let out = files
            .call(
                "edit",
                json!({"file_path": "notes.txt", "old_string": old, "new_string": new}),
            )
            .await;
        assert!(!out.is_error, "{out:?}");
    }
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "1\n2\n");
    // Another conversation has its own view; none at all, no rule.
    let other = files
        .call_in(
            &files.ctx(Confinement::Workspace, Some("c2")),
            "write",
            json!({"file_path": "notes.txt", "content": "x\n"}),
        )
        .await;
    assert!(other.is_error);
    let standalone = files
        .call_in(
            &files.ctx(Confinement::Workspace, None),
            "write",
            json!({"file_path": "notes.txt", "content": "x\n"}),
        )
        .await;
    assert!(!standalone.is_error, "{standalone:?}");
}

#[tokio::test]
async fn a_ten_megabyte_file_is_read_in_pages() {
    let files = Files::new();
    let path = files.path("big.log");
    let mut content = String::new();
    let mut n = 0;
    while content.len() < 10 * 1024 * 1024 {
        n += 1;
        content.push_str(&format!("line {n} {}\n", "x".repeat(80)));
    }
    std::fs::write(&path, &content).unwrap();
    let first = text(&files.call("read", json!({"file_path": "big.log"})).await);
    let header = first.lines().next().unwrap();
    assert_eq!(
        header,
        format!(
            "big.log: lines 1-2000 of {n}; {} more lines: call again with offset 2001 to read on.",
            n - 2000
        )
    );
    assert_eq!(
        first.lines().nth(1).unwrap(),
        format!("     1\tline 1 {}", "x".repeat(80))
    );
    assert_eq!(first.lines().count(), 2001);
    let last = text(
        &files
            .call(
                "read",
                json!({"file_path": "big.log", "offset": n - 1, "limit": 10}),
            )
            .await,
    );
    assert!(
        last.starts_with(&format!(
            "big.log: lines {}-{n} of {n} (to the end).",
            n - 1
        )),
        "{last}"
    );
    assert!(last.ends_with(&format!("{n:>6}\tline {n} {}\n", "x".repeat(80))));
    let past = files
        .call("read", json!({"file_path": "big.log", "offset": n + 5}))
        .await;
    assert!(error(&past).contains(&format!("has {n} lines")));
}

#[tokio::test]
async fn binary_files_are_described_images_shown_directories_listed() {
    let files = Files::new();
    std::fs::write(files.path("blob.bin"), [0u8, 1, 2, 3, 0, 255, 254]).unwrap();
    let described = text(&files.call("read", json!({"file_path": "blob.bin"})).await);
    assert_eq!(
        described,
        "blob.bin is a binary file (binary data), 7 bytes; its content is not shown."
    );
    let png: &[u8] = &[
        0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, b'I', b'H', b'D', b'R',
    ];
    std::fs::write(files.path("pic.png"), png).unwrap();
    let image = files.call("read", json!({"file_path": "pic.png"})).await;
    let ToolResults::Parts(parts) = &image.results else {
        panic!("{image:?}")
    };
    assert!(matches!(&parts[1], Content::Image { mime_type, .. } if mime_type == "image/png"));
    std::fs::write(
        files.path("long.txt"),
        format!("{}\r\nshort\r\n", "y".repeat(2500)),
    )
    .unwrap();
    let long = text(&files.call("read", json!({"file_path": "long.txt"})).await);
    assert!(
        long.contains("1 long lines were cut at 2000 characters"),
        "{long}"
    );
    assert!(long.contains("… [line cut: 500 more characters]"));
    assert!(long.contains("CRLF"));
    assert!(long.contains("     2\tshort\n"));
    std::fs::create_dir(files.path("sub")).unwrap();
    let listing = text(&files.call("read", json!({"file_path": "."})).await);
    assert!(
        listing.contains("sub/\n") && listing.contains("long.txt\n"),
        "{listing}"
    );
}

fn git_init(dir: &Path) {
    let status = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn grep_and_glob_honour_gitignore_and_grep_shows_context() {
    let files = Files::new();
    git_init(&files.project);
    std::fs::write(files.path(".gitignore"), "target/\n*.log\n").unwrap();
    std::fs::create_dir_all(files.path("src")).unwrap();
    std::fs::create_dir_all(files.path("target")).unwrap();
    std::fs::write(
        files.path("src/lib.rs"),
        "// head\nfn alpha() {}\n// tail\nfn beta() {}\n",
    )
    .unwrap();
    std::fs::write(files.path("src/main.rs"), "fn main() { alpha(); }\n").unwrap();
    std::fs::write(files.path("target/gen.rs"), "fn alpha() {}\n").unwrap();
    std::fs::write(files.path("debug.log"), "alpha\n").unwrap();

    let listed = text(&files.call("grep", json!({"pattern": "alpha"})).await);
    assert_eq!(listed, "src/lib.rs\nsrc/main.rs\n");
    let content = text(
        &files
            .call(
                "grep",
                json!({"pattern": "fn alpha", "output_mode": "content", "-C": 1}),
            )
            .await,
    );
    assert_eq!(
        content,
        "src/lib.rs-1-// head\nsrc/lib.rs:2:fn alpha() {}\nsrc/lib.rs-3-// tail\n"
    );
    let counted = text(
        &files
            .call(
                "grep",
                json!({"pattern": "^fn", "output_mode": "count", "glob": "*.rs"}),
            )
            .await,
    );
    assert_eq!(counted, "src/lib.rs:2\nsrc/main.rs:1\n");
    let limited = text(
        &files
            .call(
                "grep",
                json!({"pattern": "ALPHA", "-i": true, "head_limit": 1}),
            )
            .await,
    );
    assert!(
        limited.starts_with("src/lib.rs\n… 1 more files not shown"),
        "{limited}"
    );
    // Content cut by head_limit inside a file: whole lines, in path order,
    // the rest counted.
    let cut = text(
        &files
            .call(
                "grep",
                json!({"pattern": "fn|alpha", "output_mode": "content", "head_limit": 3}),
            )
            .await,
    );
    assert_eq!(
        cut,
        "src/lib.rs:2:fn alpha() {}\nsrc/lib.rs:4:fn beta() {}\nsrc/main.rs:1:fn main() { alpha(); }\n"
    );
    let cut = text(
        &files
            .call(
                "grep",
                json!({"pattern": "fn", "output_mode": "content", "head_limit": 1, "-n": false}),
            )
            .await,
    );
    assert_eq!(
        cut,
        "src/lib.rs:fn alpha() {}\n… 2 more lines not shown (head_limit 1); narrow the search or raise head_limit.\n"
    );
    let bad = files.call("grep", json!({"pattern": "(unclosed"})).await;
    assert!(error(&bad).contains("not a valid regex"));

    let globbed = text(&files.call("glob", json!({"pattern": "**/*.rs"})).await);
    let mut found: Vec<&str> = globbed.lines().collect();
    found.sort_unstable();
    assert_eq!(found, ["src/lib.rs", "src/main.rs"]);
    let none = text(&files.call("glob", json!({"pattern": "*.log"})).await);
    assert!(none.starts_with("No files match"), "{none}");
}
