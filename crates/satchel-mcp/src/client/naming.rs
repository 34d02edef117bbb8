//! Local names for imported tools: `server__tool`, within the 64
//! characters of `[A-Za-z0-9_-]` every model provider accepts, unique
//! across all servers.

use std::collections::BTreeSet;

/// The longest tool name providers accept.
pub const MAX_NAME: usize = 64;

/// One imported tool's names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assigned {
    /// The server's name.
    pub server: String,
    /// The tool's name on the server.
    pub remote: String,
    /// The name in Satchel's registry.
    pub local: String,
    /// Set when the plain name was taken or too long, saying what happened.
    pub note: Option<String>,
}

/// `text` with every character outside `[A-Za-z0-9_-]` replaced by `_`.
pub fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Names for `(server, tool)` pairs, in order: `server__tool` sanitised and
/// cut to 64 characters; a name already given (or in `taken`) gets a
/// `_2`, `_3`... suffix within the limit, and a note saying so.
pub fn assign<'a>(
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    taken: &BTreeSet<String>,
) -> Vec<Assigned> {
    let mut used: BTreeSet<String> = taken.clone();
    let mut out = Vec::new();
    for (server, remote) in pairs {
        let wanted = sanitize(&format!("{server}__{remote}"));
        let base = cut(&wanted, MAX_NAME);
        let mut local = base.clone();
        let mut counter = 1;
        while used.contains(&local) {
            counter += 1;
            let suffix = format!("_{counter}");
            local = format!("{}{suffix}", cut(&base, MAX_NAME - suffix.len()));
        }
        let note = if local != base {
            Some(format!(
                "tool `{remote}` of server `{server}` is `{local}`: `{base}` was already taken"
            ))
        } else if base != wanted {
            Some(format!(
                "tool `{remote}` of server `{server}` is `{local}`: names are cut to {MAX_NAME} characters"
            ))
        } else {
            None
        };
        used.insert(local.clone());
        out.push(Assigned {
            server: server.to_owned(),
            remote: remote.to_owned(),
            local,
            note,
        });
    }
    out
}

/// The first `max` characters (all ASCII after sanitising).
fn cut(text: &str, max: usize) -> String {
    satchel_core::text::char_prefix(text, max).0.to_owned()
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn names_are_sanitised_cut_and_unique() {
        let long = "x".repeat(80);
        let assigned = assign(
            [
                ("everything", "echo"),
                ("my.server", "read file"),
                ("my_server", "read_file"),
                ("s", long.as_str()),
                ("s", long.as_str()),
                ("t", "bash"),
            ],
            &BTreeSet::from(["t__bash".to_owned()]),
        );
        let locals: Vec<&str> = assigned.iter().map(|a| a.local.as_str()).collect();
        let cut64 = format!("s__{}", "x".repeat(61));
        let cut62 = format!("s__{}_2", "x".repeat(59));
        assert_eq!(
            locals,
            [
                "everything__echo",
                "my_server__read_file",
                "my_server__read_file_2",
                cut64.as_str(),
                cut62.as_str(),
                "t__bash_2",
            ]
        );
        assert!(locals.iter().all(|l| satchel_core::is_valid_tool_name(l)));
        assert_eq!(assigned[0].note, None);
        assert_eq!(assigned[1].note, None);
        assert_eq!(
            assigned[2].note.as_deref(),
            Some(
                "tool `read_file` of server `my_server` is `my_server__read_file_2`: `my_server__read_file` was already taken"
            )
        );
        assert!(
            assigned[3]
                .note
                .as_deref()
                .unwrap()
                .ends_with("names are cut to 64 characters")
        );
    }
}
