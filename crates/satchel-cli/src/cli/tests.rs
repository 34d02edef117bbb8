//! The command line's own checks: durations, clap's consistency, and
//! deferred subcommands describing themselves.

use std::time::Duration;

use super::*;

#[test]
fn since_takes_ages_and_times() {
    assert_eq!(parse_since("30s"), Ok(Since::Ago(Duration::from_secs(30))));
    assert_eq!(parse_since("15m"), Ok(Since::Ago(Duration::from_secs(900))));
    assert_eq!(parse_since("2h"), Ok(Since::Ago(Duration::from_secs(7200))));
    assert_eq!(
        parse_since("1d"),
        Ok(Since::Ago(Duration::from_secs(86_400)))
    );
    assert_eq!(
        parse_since("1w"),
        Ok(Since::Ago(Duration::from_secs(604_800)))
    );
    assert_eq!(
        parse_since("2025-01-02T03:04:05Z"),
        Ok(Since::At(satchel_store::Timestamp::from_millis(
            1_735_787_045_000
        )))
    );
    for bad in ["", "d", "1", "1y", "-1d", "1.5h", "99999999999999999999d"] {
        assert!(parse_since(bad).is_err(), "{bad}");
    }
}

#[test]
fn the_syntax_is_consistent() {
    use clap::CommandFactory;
    Cli::command().debug_assert();
}

/// Subcommands are built when run (`defer`), after their own
/// attributes: an `Args` struct's doc comment would then replace the
/// command's description in its `--help` (and not in its parent's
/// list). Such structs take `//` comments.
#[test]
fn a_subcommand_describes_itself_as_its_parent_lists_it() {
    use clap::CommandFactory;
    type Described = (String, String, String);
    fn listed(command: &clap::Command, path: &str, out: &mut Vec<Described>) {
        // `build` adds a `help` subcommand to each command that has some.
        for sub in command
            .get_subcommands()
            .filter(|sub| sub.get_name() != "help")
        {
            let path = format!("{path} {}", sub.get_name());
            let text = |about: Option<&clap::builder::StyledStr>| {
                about.map(ToString::to_string).unwrap_or_default()
            };
            let (about, long) = (text(sub.get_about()), text(sub.get_long_about()));
            out.push((path.clone(), about, long));
            listed(sub, &path, out);
        }
    }
    let mut before = Vec::new();
    listed(&Cli::command(), "satchel", &mut before);
    let mut built = Cli::command();
    built.build();
    let mut after = Vec::new();
    listed(&built, "satchel", &mut after);
    assert!(before.len() > 40, "{before:?}");
    assert_eq!(before.len(), after.len());
    let changed: Vec<_> = before.iter().zip(&after).filter(|(b, a)| b != a).collect();
    assert!(changed.is_empty(), "{changed:#?}");
}
