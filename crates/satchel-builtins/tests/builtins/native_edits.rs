//! The editing tools' model-native forms — Anthropic's text editor and
//! Codex's `apply_patch` — through the registry, as a model calls them:
//! the same engine, boundaries and stale-file rule as `edit` and `write`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Tests fail loudly by design.

use pretty_assertions::assert_eq;
use satchel_core::edit_forms::{APPLY_PATCH, TEXT_EDITOR};
use satchel_tools::sandbox::Confinement;
use serde_json::json;

use super::files::{Files, error, mode, text};

#[tokio::test]
async fn the_text_editor_views_creates_replaces_and_inserts() {
    let files = Files::new();
    let out = files
        .call(
            TEXT_EDITOR,
            json!({"command": "create", "path": "notes.txt", "file_text": "one\ntwo\nthree\n"}),
        )
        .await;
    assert!(!out.is_error, "{out:?}");
    let out = files
        .call(
            TEXT_EDITOR,
            json!({"command": "view", "path": "notes.txt", "view_range": [2, -1]}),
        )
        .await;
    let shown = text(&out);
    assert!(
        shown.contains("2\ttwo") && shown.contains("3\tthree"),
        "{shown}"
    );
    assert!(!shown.contains("1\tone"), "{shown}");

    let out = files
        .call(
            TEXT_EDITOR,
            json!({"command": "str_replace", "path": "notes.txt", "old_str": "two", "new_str": "2"}),
        )
        .await;
    assert!(!out.is_error, "{out:?}");
    let out = files
        .call(
            TEXT_EDITOR,
            json!({"command": "insert", "path": "notes.txt", "insert_line": 1, "insert_text": "one and a half"}),
        )
        .await;
    assert!(!out.is_error, "{out:?}");
    assert_eq!(
        std::fs::read_to_string(files.path("notes.txt")).unwrap(),
        "one\none and a half\n2\nthree\n"
    );
    // Two matches: refused, naming the lines, file untouched.
    std::fs::write(files.path("dup.txt"), "x\ny\nx\n").unwrap();
    let out = files
        .call(
            TEXT_EDITOR,
            json!({"command": "str_replace", "path": "dup.txt", "old_str": "x", "new_str": "z"}),
        )
        .await;
    let message = error(&out);
    assert!(message.contains("occurs 2 times"), "{message}");
    assert_eq!(out.results.structured().unwrap()["lines"], json!([1, 3]));
    assert_eq!(
        std::fs::read_to_string(files.path("dup.txt")).unwrap(),
        "x\ny\nx\n"
    );
    let out = files
        .call(
            TEXT_EDITOR,
            json!({"command": "insert", "path": "dup.txt", "insert_line": 9, "insert_text": "z"}),
        )
        .await;
    assert!(error(&out).contains("past the end"), "{out:?}");
}

#[tokio::test]
async fn the_text_editor_keeps_crlf_and_obeys_the_boundaries() {
    let files = Files::new();
    std::fs::write(files.path("win.txt"), "a\r\nb\r\n").unwrap();
    let out = files
        .call(
            TEXT_EDITOR,
            json!({"command": "insert", "path": "win.txt", "insert_line": 2, "insert_text": "c\nd"}),
        )
        .await;
    assert!(!out.is_error, "{out:?}");
    assert_eq!(
        std::fs::read(files.path("win.txt")).unwrap(),
        b"a\r\nb\r\nc\r\nd\r\n"
    );
    let outside = files.path("../outside/x.txt");
    let out = files
        .call(
            TEXT_EDITOR,
            json!({"command": "create", "path": outside, "file_text": "no"}),
        )
        .await;
    assert!(out.is_error, "{out:?}");
    assert!(!outside.exists());
    let readonly = files.ctx(Confinement::ReadOnly, Some("c1"));
    let out = files
        .call_in(
            &readonly,
            TEXT_EDITOR,
            json!({"command": "str_replace", "path": "win.txt", "old_str": "a", "new_str": "z"}),
        )
        .await;
    assert!(error(&out).contains("readonly"), "{out:?}");
}

#[tokio::test]
async fn a_patch_adds_updates_moves_and_deletes_keeping_modes_and_endings() {
    use std::os::unix::fs::PermissionsExt;
    let files = Files::new();
    std::fs::write(files.path("run.sh"), "#!/bin/sh\necho old\n").unwrap();
    std::fs::set_permissions(files.path("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(files.path("win.txt"), "\u{feff}one\r\ntwo\r\n").unwrap();
    std::fs::write(files.path("old.txt"), "keep\n").unwrap();
    std::fs::write(files.path("gone.txt"), "bye\n").unwrap();
    let patch = "*** Begin Patch\n\
        *** Add File: src/new.rs\n+fn main() {}\n\
        *** Update File: run.sh\n@@\n #!/bin/sh\n-echo old\n+echo new\n\
        *** Update File: win.txt\n@@\n-two\n+deux\n\
        *** Update File: old.txt\n*** Move to: moved/new.txt\n@@\n-keep\n+kept\n\
        *** Delete File: gone.txt\n\
        *** End Patch";
    let out = files.call(APPLY_PATCH, json!({ "input": patch })).await;
    assert!(!out.is_error, "{out:?}");
    let summary = out.results.structured().unwrap()["summary"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        summary,
        "Success. Updated the following files:\nA src/new.rs\nM run.sh\nM win.txt\nM moved/new.txt\nD gone.txt"
    );
    assert_eq!(
        std::fs::read_to_string(files.path("src/new.rs")).unwrap(),
        "fn main() {}\n"
    );
    assert_eq!(
        std::fs::read_to_string(files.path("run.sh")).unwrap(),
        "#!/bin/sh\necho new\n"
    );
    assert_eq!(mode(&files.path("run.sh")), 0o755);
    assert_eq!(
        std::fs::read(files.path("win.txt")).unwrap(),
        "\u{feff}one\r\ndeux\r\n".as_bytes()
    );
    assert_eq!(
        std::fs::read_to_string(files.path("moved/new.txt")).unwrap(),
        "kept\n"
    );
    assert!(!files.path("old.txt").exists());
    assert!(!files.path("gone.txt").exists());
}

#[tokio::test]
async fn a_patch_that_fails_anywhere_changes_nothing() {
    let files = Files::new();
    std::fs::write(files.path("a.txt"), "alpha\n").unwrap();
    std::fs::write(files.path("b.txt"), "beta\n").unwrap();
    // The second file's hunk does not match: the first is not changed.
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-alpha\n+ALPHA\n\
                 *** Update File: b.txt\n@@\n-gamma\n+GAMMA\n*** End Patch";
    let out = files.call(APPLY_PATCH, json!({ "input": patch })).await;
    let message = error(&out);
    assert!(
        message.contains("b.txt")
            && message.contains("gamma")
            && message.contains("Nothing was changed"),
        "{message}"
    );
    assert_eq!(
        std::fs::read_to_string(files.path("a.txt")).unwrap(),
        "alpha\n"
    );
    // A file outside the project, or in a protected path, refuses the whole patch.
    for path in [
        "../outside/x.txt",
        ".agents/agent.json",
        ".git/hooks/pre-commit",
    ] {
        let patch = format!(
            "*** Begin Patch\n*** Update File: a.txt\n@@\n-alpha\n+ALPHA\n*** Add File: {path}\n+x\n*** End Patch"
        );
        let out = files.call(APPLY_PATCH, json!({ "input": patch })).await;
        assert!(out.is_error, "{path}: {out:?}");
        assert_eq!(
            std::fs::read_to_string(files.path("a.txt")).unwrap(),
            "alpha\n"
        );
    }
    // Adding over an existing file is refused; so is a malformed patch.
    let out = files
        .call(
            APPLY_PATCH,
            json!({"input": "*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch"}),
        )
        .await;
    assert!(error(&out).contains("already exists"), "{out:?}");
    let out = files
        .call(APPLY_PATCH, json!({"input": "--- a.txt\n+++ a.txt\n"}))
        .await;
    assert!(error(&out).contains("*** Begin Patch"), "{out:?}");
}

#[tokio::test]
async fn a_patch_of_a_file_changed_since_it_was_read_is_refused() {
    let files = Files::new();
    std::fs::write(files.path("a.txt"), "one\n").unwrap();
    let out = files.call("read", json!({"file_path": "a.txt"})).await;
    assert!(!out.is_error);
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(files.path("a.txt"), "one\nadded by someone\n").unwrap();
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+1\n*** End Patch";
    let out = files.call(APPLY_PATCH, json!({ "input": patch })).await;
    assert!(error(&out).contains("changed on disk"), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(files.path("a.txt")).unwrap(),
        "one\nadded by someone\n"
    );
}
