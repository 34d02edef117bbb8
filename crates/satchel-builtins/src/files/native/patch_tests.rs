//! The patch grammar and the hunks' matching, case by case.

use super::*;

fn update(hunks: &str) -> Vec<Hunk> {
    let patch = format!("*** Begin Patch\n*** Update File: a.txt\n{hunks}\n*** End Patch");
    match parse(&patch).unwrap().remove(0) {
        FileOp::Update { hunks, .. } => hunks,
        other => panic!("not an update: {other:?}"),
    }
}

#[test]
fn every_kind_of_operation_is_read() {
    let ops = parse(
        "*** Begin Patch\n*** Add File: new.txt\n+one\n+two\n*** Delete File: gone.txt\n\
         *** Update File: src/a.rs\n*** Move to: src/b.rs\n@@ fn main() {\n-    old();\n+    new();\n \
         }\n*** End Patch\n",
    )
    .unwrap();
    assert_eq!(
        ops,
        vec![
            FileOp::Add {
                path: "new.txt".into(),
                contents: "one\ntwo\n".into()
            },
            FileOp::Delete {
                path: "gone.txt".into()
            },
            FileOp::Update {
                path: "src/a.rs".into(),
                move_to: Some("src/b.rs".into()),
                hunks: vec![Hunk {
                    anchor: Some("fn main() {".into()),
                    old: vec!["    old();".into(), "}".into()],
                    new: vec!["    new();".into(), "}".into()],
                    end_of_file: false,
                }],
            },
        ]
    );
}

#[test]
fn a_heredoc_around_the_patch_is_unwrapped() {
    let ops =
        parse("apply_patch <<'EOF'\n*** Begin Patch\n*** Delete File: x\n*** End Patch\nEOF\n")
            .unwrap();
    assert_eq!(ops, vec![FileOp::Delete { path: "x".into() }]);
}

#[test]
fn malformed_patches_say_where_and_what() {
    let cases = [
        (
            "*** Update File: a\n@@\n-x\n*** End Patch",
            "starts with the line `*** Begin Patch`",
        ),
        (
            "*** Begin Patch\n*** Delete File: a",
            "ends with the line `*** End Patch`",
        ),
        ("*** Begin Patch\n*** End Patch", "changes no file"),
        (
            "*** Begin Patch\n*** Add File: a\nno plus\n*** End Patch",
            "line 3: every line",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n*** End Patch",
            "has no hunk",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n@@\n*x\n*** End Patch",
            "line 4: a hunk's lines",
        ),
        (
            "*** Begin Patch\n*** Frobnicate: a\n*** End Patch",
            "line 2: expected",
        ),
        (
            "*** Begin Patch\n*** Add File: \n+x\n*** End Patch",
            "names no file",
        ),
    ];
    for (patch, expected) in cases {
        let error = parse(patch).unwrap_err().0;
        assert!(error.contains(expected), "{patch:?}: {error}");
    }
}

#[test]
fn hunks_apply_in_order_after_their_anchor() {
    let text = "fn a() {\n    x();\n}\nfn b() {\n    x();\n}\n";
    let hunks = update("@@ fn b() {\n-    x();\n+    y();");
    assert_eq!(
        apply(text, &hunks).unwrap(),
        "fn a() {\n    x();\n}\nfn b() {\n    y();\n}\n"
    );
    let hunks = update("@@\n-    x();\n+    first();\n@@\n-    x();\n+    second();");
    assert_eq!(
        apply(text, &hunks).unwrap(),
        "fn a() {\n    first();\n}\nfn b() {\n    second();\n}\n"
    );
}

#[test]
fn whitespace_and_typography_are_forgiven_in_that_order() {
    let text = "let s = \u{201C}hi\u{201D};  \n\tindented\n";
    let hunks = update("@@\n-let s = \"hi\";\n+let s = \"bye\";\n-  indented\n+\tdone");
    assert_eq!(apply(text, &hunks).unwrap(), "let s = \"bye\";\n\tdone\n");
}

#[test]
fn a_missing_hunk_names_its_lines_and_changes_nothing() {
    let hunks = update("@@\n-one\n+1\n@@\n-three\n+3");
    let error = apply("one\ntwo\n", &hunks).unwrap_err().0;
    assert_eq!(
        error,
        "hunk 2 of 2: these lines were not found after line 1:\nthree"
    );
}

#[test]
fn end_of_file_hunks_and_pure_additions() {
    let text = "x\ny\nx\n";
    let hunks = update("@@\n-x\n+z\n*** End of File");
    assert_eq!(apply(text, &hunks).unwrap(), "x\ny\nz\n");
    let hunks = update("@@\n+appended");
    assert_eq!(apply(text, &hunks).unwrap(), "x\ny\nx\nappended\n");
    // No final newline stays without one.
    assert_eq!(apply("a\nb", &update("@@\n-b\n+c")).unwrap(), "a\nc");
}

#[test]
fn a_trailing_empty_line_stands_for_the_end() {
    let hunks = update("@@\n-last\n+final\n");
    assert_eq!(apply("first\nlast\n", &hunks).unwrap(), "first\nfinal\n");
}
