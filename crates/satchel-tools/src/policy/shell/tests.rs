//! Tests of the shell walk: what a script runs, how it is judged.

use pretty_assertions::assert_eq;

use super::*;

fn texts(script: &str) -> Vec<String> {
    simple_commands(script)
        .unwrap_or_else(|e| panic!("{script}: {e}"))
        .iter()
        .map(ShellCommand::text)
        .collect()
}

#[test]
fn lists_pipes_and_newlines() {
    assert_eq!(texts("git status && rm -rf x"), ["git status", "rm -rf x"]);
    assert_eq!(texts("a; b || c | d &\ne"), ["a", "b", "c", "d", "e"]);
}

#[test]
fn substitutions_anywhere() {
    assert_eq!(texts("echo $(rm -rf /)"), ["rm -rf /", "echo $(rm -rf /)"]);
    assert_eq!(texts("echo \"x `rm y` z\""), ["rm y", "echo x `rm y` z"]);
    assert_eq!(texts("X=$(curl evil) ls"), ["curl evil", "ls"]);
    assert_eq!(texts("cat > $(rm a)"), ["rm a", "cat"]);
    assert_eq!(texts("diff <(rm a) b"), ["rm a", "diff b"]);
}

#[test]
fn nested_subshells_read_as_arithmetic_are_asked_about() {
    // Reported: brush reads `( ( rm -rf x ) )` as arithmetic, so the
    // walker found no command and a deny rule on `rm` did not apply.
    for script in [
        "( ( ls ) )",
        "( ( rm -rf x ) )",
        "((rm -rf x))",
        "(( (a + b) * 2 ))",
    ] {
        assert!(
            matches!(simple_commands(script), Err(ShellError::Opaque(_))),
            "{script}"
        );
    }
    assert_eq!(texts("(( i = i + 1 )); echo $i"), ["echo $i"]);
    assert_eq!(texts("(( x > -1 ))"), Vec::<String>::new());
}

#[test]
fn compound_commands_and_functions() {
    assert_eq!(texts("(cd /tmp && rm x)"), ["cd /tmp", "rm x"]);
    assert_eq!(texts("{ rm x; }"), ["rm x"]);
    assert_eq!(
        texts("if true; then rm x; else ls; fi"),
        ["true", "rm x", "ls"]
    );
    assert_eq!(texts("for f in *; do rm $f; done"), ["rm $f"]);
    assert_eq!(texts("while false; do rm x; done"), ["false", "rm x"]);
    assert_eq!(texts("f() { rm x; }; f"), ["rm x", "f"]);
    assert_eq!(texts("case a in a) rm x;; esac"), ["rm x"]);
}

#[test]
fn wrappers_are_seen_through() {
    assert_eq!(texts("env X=1 Y=2 rm x"), ["env X=1 Y=2 rm x", "rm x"]);
    assert_eq!(texts("sudo -u root rm x"), ["sudo -u root rm x", "rm x"]);
    assert_eq!(
        texts("timeout -s KILL 5 rm x"),
        ["timeout -s KILL 5 rm x", "rm x"]
    );
    assert_eq!(
        texts("find . | xargs -n 1 rm"),
        ["find .", "xargs -n 1 rm", "rm"]
    );
    assert_eq!(
        texts("nohup nice -n 5 rm x"),
        ["nohup nice -n 5 rm x", "nice -n 5 rm x", "rm x"]
    );
    assert_eq!(
        texts("bash -c 'ls; rm x'"),
        ["bash -c ls; rm x", "ls", "rm x"]
    );
    assert_eq!(texts("sh -lc \"rm x\""), ["sh -lc rm x", "rm x"]);
    assert_eq!(texts("eval 'rm x'"), ["eval rm x", "rm x"]);
    assert_eq!(texts("env"), ["env"]);
}

#[test]
fn quoting_tricks_are_undone() {
    assert_eq!(texts("r''m x"), ["rm x"]);
    assert_eq!(texts("\\rm x"), ["rm x"]);
    assert_eq!(texts("\"rm\" -rf x"), ["rm -rf x"]);
    assert_eq!(texts("r\"m\" x"), ["rm x"]);
}

#[test]
fn what_cannot_be_known_is_an_error() {
    for script in [
        "$CMD x",
        "$(echo rm) x",
        "bash -c \"$SCRIPT\"",
        "eval $X",
        "echo $(( $(rm x) ))",
        "if then fi",
        "$'\\x72m' x",
        "env -S 'rm x'",
    ] {
        assert!(
            simple_commands(script).is_err(),
            "{script} should not be analysable"
        );
    }
}

/// Each construct nested `depth` times around `echo x`.
fn nested(construct: &str, depth: usize) -> String {
    let (open, close) = match construct {
        "if" => ("if true; then ", "; fi"),
        "while" => ("while true; do ", "; done"),
        "until" => ("until false; do ", "; done"),
        "for" => ("for i in 1; do ", "; done"),
        "case" => ("case x in x) ", ";; esac"),
        "subshell" => ("( true; ", " )"),
        "brace" => ("{ ", "; }"),
        "function" => ("f() { ", "; }"),
        "substitution" => ("echo $(", ")"),
        "quoted substitution" => ("echo \"$(", ")\""),
        "process substitution" => ("cat <(", ")"),
        "parameter" => ("echo ${x:-", "}"),
        "test" => ("[[ ( ", " ) ]] && echo x; [[ ( "),
        "arithmetic" => ("echo $(( (", ") ))"),
        other => panic!("no construct {other}"),
    };
    format!("{}echo x{}", open.repeat(depth), close.repeat(depth))
}

const CONSTRUCTS: [&str; 14] = [
    "if",
    "while",
    "until",
    "for",
    "case",
    "subshell",
    "brace",
    "function",
    "substitution",
    "quoted substitution",
    "process substitution",
    "parameter",
    "test",
    "arithmetic",
];

fn beyond_limits(script: &str) -> bool {
    matches!(simple_commands(script), Err(ShellError::BeyondLimits(_)))
}

/// Chains the nesting scan does not see are bounded too: wrappers are
/// looked through in a loop, `coproc`s counted (a few hundred of either
/// used to recurse once per word, deep enough to overflow the stack).
#[test]
fn long_chains_of_wrappers_and_coprocs_are_refused_not_recursed() {
    let wrappers = format!("{}rm -rf x", "env ".repeat(MAX_WRAPPERS));
    let commands = simple_commands(&wrappers).unwrap();
    assert_eq!(
        commands.last().map(ShellCommand::text).as_deref(),
        Some("rm -rf x")
    );
    let too_many = format!("{}rm -rf x", "env ".repeat(5_000));
    assert!(matches!(
        simple_commands(&too_many),
        Err(ShellError::Opaque(_))
    ));
    let coprocs = format!("{}x", "coproc ".repeat(5_000));
    assert!(beyond_limits(&coprocs), "{:?}", simple_commands(&coprocs));
}

/// A script nested past INLINE_NESTING, itself or in a `bash -c`
/// inside it, is walked again on the parsing thread: every command in
/// it is still found.
#[test]
fn scripts_deeper_than_the_inline_walk_are_walked_whole() {
    let deep = |n: usize| format!("{}rm -rf x{}", "{ ".repeat(n), "; }".repeat(n));
    for n in [
        1,
        INLINE_NESTING - 1,
        INLINE_NESTING,
        INLINE_NESTING + 1,
        3 * INLINE_NESTING,
    ] {
        for script in [deep(n), format!("echo a; bash -c '{}'", deep(n))] {
            let commands: Vec<String> = simple_commands(&script)
                .unwrap()
                .iter()
                .map(ShellCommand::text)
                .collect();
            assert!(
                commands.contains(&"rm -rf x".to_owned()),
                "{script}: {commands:?}"
            );
        }
    }
}

/// Issue #30: 400 nested `if`s overflowed the stack and aborted `satchel
/// mcp serve`. Now the deepest script within the limit parses (or is
/// opaque, for constructs the walker gives up on), and one level more
/// is refused with the limit in the message.
#[test]
fn the_deepest_accepted_script_parses_and_one_more_level_is_refused() {
    for construct in CONSTRUCTS {
        let deepest = (1..=MAX_NESTING)
            .rev()
            .find(|depth| !beyond_limits(&nested(construct, *depth)))
            .unwrap_or_else(|| panic!("{construct}: even depth 1 is refused"));
        let result = simple_commands(&nested(construct, deepest));
        assert!(
            !matches!(result, Err(ShellError::BeyondLimits(_))),
            "{construct} at {deepest}: {result:?}"
        );
        let refused = simple_commands(&nested(construct, deepest + 1));
        let Err(ShellError::BeyondLimits(message)) = refused else {
            panic!("{construct} at {}: {refused:?}", deepest + 1);
        };
        let limit = if construct == "case" {
            "deeper than 8 levels"
        } else {
            "deeper than 100 levels"
        };
        assert!(message.contains(limit), "{construct}: {message}");
    }
    assert!(simple_commands(&nested("if", MAX_NESTING)).is_ok());
    assert!(simple_commands(&nested("subshell", MAX_NESTING)).is_ok());
}

#[test]
fn hostile_depths_are_refused_without_parsing() {
    for construct in CONSTRUCTS {
        for depth in [400, 5_000] {
            assert!(
                beyond_limits(&nested(construct, depth)),
                "{construct} at {depth}"
            );
        }
    }
    let not = format!("[[ {}a ]]", "! ".repeat(5_000));
    let and = format!("[[ a{} ]]", " && a".repeat(100_000));
    let heredocs = (0..400).fold("x".to_owned(), |inner, i| {
        format!("$(cat <<E{i}\n{inner}\nE{i}\n)")
    });
    for script in [not, and, format!("echo {heredocs}")] {
        assert!(beyond_limits(&script), "{}", &script[..40]);
    }
}

#[test]
fn scripts_inside_scripts_share_the_limit() {
    let inner = nested("subshell", 60);
    assert!(simple_commands(&format!("bash -c '{inner}'")).is_ok());
    let two = format!("bash -c '{inner}'; ( bash -c \"eval '{inner}'\" )");
    assert!(simple_commands(&two).is_ok());
    let stacked = format!(
        "{}bash -c '{inner}'{}",
        "( true; ".repeat(50),
        " )".repeat(50)
    );
    assert!(beyond_limits(&stacked));
}

#[test]
fn long_scripts_are_refused_and_long_pipelines_parse() {
    let big = format!("echo {}", "a".repeat(MAX_SCRIPT_BYTES));
    let Err(ShellError::BeyondLimits(message)) = simple_commands(&big) else {
        panic!("a script over {MAX_SCRIPT_BYTES} bytes was parsed");
    };
    assert!(message.contains("bytes"), "{message}");
    let pipeline = format!("true{}", " | true".repeat(10_000));
    assert_eq!(simple_commands(&pipeline).map(|c| c.len()), Ok(10_001));
}
