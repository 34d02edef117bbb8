//! Property tests of the policy's shell parser and rule matcher on hostile
//! input: random scripts from a small shell grammar (nested up to and past
//! the nesting limit, sometimes cut short), random shell-ish text and
//! random bytes. Whatever the input, the answer is a list of commands or an
//! error, never a panic or a stack overflow (which would abort the test
//! binary).
//!
//! The default run (256 cases per property, about a second) takes a few seconds; set
//! `PROPTEST_CASES=5000` (for instance) for a longer hunt. A failure prints
//! the smallest input found and saves its seed under
//! `proptest-regressions/`.

use proptest::prelude::*;
use satchel_core::ToolSpec;
use satchel_tools::policy::shell::{MAX_NESTING, ShellError, simple_commands};
use satchel_tools::policy::{Mode, Policy, Rule, RuleKind, glob_matches};
use serde_json::json;

/// Cases per property unless `PROPTEST_CASES` says otherwise.
const DEFAULT_CASES: u32 = 256;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

/// A simple command: a name and a few arguments.
fn simple() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{1,5}( [a-z0-9./=-]{1,6}){0,3}",
        Just("rm -rf x".to_owned()),
        Just("echo 'a ( b { c'".to_owned()),
        Just("X=$(date) env".to_owned()),
        Just("echo ${HOME:-/}".to_owned()),
        Just("echo $((1 + (2 << 3)))".to_owned()),
        Just("cat <<EOF\nif ( {\n$(id)\nEOF\n".to_owned()),
    ]
}

/// Scripts from a small grammar: every construct the nesting scan counts,
/// nested a few levels.
fn script() -> impl Strategy<Value = String> {
    simple().prop_recursive(6, 48, 3, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("if {a}; then {b}; fi")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("while {a}; do {b}; done")),
            inner
                .clone()
                .prop_map(|a| format!("for i in 1 2; do {a}; done")),
            inner
                .clone()
                .prop_map(|a| format!("case x in (x) {a};; *) ;; esac")),
            inner.clone().prop_map(|a| format!("( {a} )")),
            inner.clone().prop_map(|a| format!("{{ {a}; }}")),
            inner.clone().prop_map(|a| format!("f() {{ {a}; }}")),
            inner.clone().prop_map(|a| format!("echo $({a})")),
            inner.clone().prop_map(|a| format!("echo \"$({a})\"")),
            inner.clone().prop_map(|a| format!("echo `{a}`")),
            inner.clone().prop_map(|a| format!("diff <({a}) b")),
            inner
                .clone()
                .prop_map(|a| format!("bash -c '{}'", a.replace('\'', ""))),
            inner
                .clone()
                .prop_map(|a| format!("[[ ( -n x && ! -z y ) ]] && {a}")),
            inner.clone().prop_map(|a| format!("cat <<E\n$({a})\nE\n")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a} && {b} | {b}; {a}")),
        ]
    })
}

/// One construct nested `depth` times: around the limit, and far past it.
fn deep() -> impl Strategy<Value = String> {
    let openers = prop_oneof![
        Just(("if true; then ", "; fi")),
        Just(("while true; do ", "; done")),
        Just(("case x in x) ", ";; esac")),
        Just(("( true; ", " )")),
        Just(("{ ", "; }")),
        Just(("echo $(", ")")),
        Just(("echo \"$(", ")\"")),
        Just(("cat <(", ")")),
        Just(("echo ${x:-", "}")),
        Just(("[[ ( ", " ) ]]")),
        Just(("[[ ! ", " ]]")),
        Just(("echo $(( (", ") ))")),
    ];
    (openers, 1..MAX_NESTING * 3).prop_map(|((open, close), depth)| {
        format!("{}echo x{}", open.repeat(depth), close.repeat(depth))
    })
}

/// A script, maybe cut at a random byte (unbalanced on purpose).
fn maybe_cut(script: String, cut: Option<usize>) -> String {
    match cut {
        Some(at) => {
            let mut at = at % (script.len() + 1);
            while !script.is_char_boundary(at) {
                at -= 1;
            }
            script[..at].to_owned()
        }
        None => script,
    }
}

fn bash_spec() -> ToolSpec {
    serde_json::from_value(json!({
        "name": "bash",
        "description": "shell",
        "inputSchema": {"type": "object"}
    }))
    .unwrap()
}

/// Parsing gives commands or an error; a deep script gives the limit error.
fn analyse(script: &str) {
    match simple_commands(script) {
        Ok(_) | Err(ShellError::Opaque(_)) => {}
        Err(ShellError::BeyondLimits(message)) => {
            assert!(
                message.contains("levels") || message.contains("bytes"),
                "{message}"
            );
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn grammar_scripts_parse_or_fail_cleanly(script in script(), cut in proptest::option::of(any::<usize>())) {
        analyse(&maybe_cut(script, cut));
    }

    #[test]
    fn deep_scripts_parse_or_are_refused(script in deep(), cut in proptest::option::of(any::<usize>())) {
        analyse(&maybe_cut(script, cut));
    }

    #[test]
    fn shell_soup_parses_or_fails_cleanly(script in "[ a-z()${}`\"'\\\\;&|<>!#\\[\\]\n=-]{0,400}") {
        analyse(&script);
    }

    #[test]
    fn random_bytes_parse_or_fail_cleanly(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        analyse(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn rules_parse_and_match_whatever_the_text(
        rule in "[a-z_*]{0,8}(\\([ -~]{0,20}\\))?",
        command in "[ -~]{0,60}",
        pattern in "[a-z* ]{0,12}",
    ) {
        if let Ok(rule) = Rule::parse(RuleKind::Deny, &rule, None) {
            let _ = rule.matches_tool("bash");
            let _ = rule.matches_command(&command);
            let policy = Policy::new(vec![rule], Mode::Workspace, Vec::new(), 1, std::time::Duration::ZERO);
            let decision = policy.decide(&bash_spec(), &json!({"command": command}));
            prop_assert!(!decision.judgements.is_empty());
        }
        let _ = glob_matches(&pattern, &command);
    }
}
