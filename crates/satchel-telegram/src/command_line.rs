//! What a command is: the table Telegram registers for the bot's menu,
//! and reading one from a message (`/name args`, `/name@bot args`). What
//! each does is `commands`'.

/// The commands and their descriptions, as `setMyCommands` registers them.
pub(crate) const COMMANDS: &[(&str, &str)] = &[
    ("start", "What this bot is"),
    ("help", "The commands"),
    ("new", "Start a new conversation"),
    (
        "newsession",
        "End the memory session and start a new one [name]",
    ),
    ("goal", "Show or set the conversation's goal [text]"),
    ("context", "Tokens of the next request, by section"),
    (
        "codestats",
        "What the code tool ran in the last 7 days, with a chart",
    ),
    ("codefailures", "The last failed code runs [n]"),
    ("tools", "The tools the model can call"),
    ("memory", "Memory counts, or what it recalls for [query]"),
    ("stop", "Stop the running answer and its processes"),
];

/// A command: its name (without `/` and `@bot`) and the rest of the line.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Command {
    pub(crate) name: String,
    pub(crate) args: String,
}

/// The command in `text`, if it is one addressed to this bot
/// (`/name`, `/name@this_bot`).
pub(crate) fn parse(text: &str, username: Option<&str>) -> Option<Command> {
    let rest = text.trim_start().strip_prefix('/')?;
    let (word, args) = rest
        .split_once(char::is_whitespace)
        .map_or((rest, ""), |(word, args)| (word, args.trim()));
    let (name, addressee) = word
        .split_once('@')
        .map_or((word, None), |(n, a)| (n, Some(a)));
    if let (Some(addressee), Some(username)) = (addressee, username)
        && !addressee.eq_ignore_ascii_case(username)
    {
        return None;
    }
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    Some(Command {
        name: name.to_ascii_lowercase(),
        args: args.to_owned(),
    })
}

/// True for `/stop`, which does not wait in the queue.
pub(crate) fn is_stop(text: &str, username: Option<&str>) -> bool {
    parse(text, username).is_some_and(|command| command.name == "stop")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_parsed_for_this_bot_only() {
        assert_eq!(
            parse("/goal  write a poem ", Some("satchel_bot")),
            Some(Command {
                name: "goal".into(),
                args: "write a poem".into()
            })
        );
        assert_eq!(
            parse("/Stop@Satchel_Bot", Some("satchel_bot"))
                .unwrap()
                .name,
            "stop"
        );
        assert_eq!(parse("/stop@other_bot", Some("satchel_bot")), None);
        assert_eq!(parse("not /a command", None), None);
        assert_eq!(parse("/ nothing", None), None);
        assert_eq!(parse("/path/to/file is big", None), None);
        assert!(is_stop("/stop", None));
        assert!(!is_stop("/stopwatch", None));
    }
}
