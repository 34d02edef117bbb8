//! Which hooks apply: matchers as Claude Code reads them (empty or `*`
//! for all; `A|B` of plain names, exact; anything else a regular
//! expression searched in the name), over a tool's names as Satchel and
//! as Claude Code spell them (`bash` and `Bash`, an MCP import
//! `server__tool` and `mcp__server__tool`).

use regex::Regex;

/// Satchel's tool names and Claude Code's for the same tool.
const ALIASES: &[(&str, &str)] = &[
    ("bash", "Bash"),
    ("read", "Read"),
    ("edit", "Edit"),
    ("write", "Write"),
    ("glob", "Glob"),
    ("grep", "Grep"),
    ("fetch", "WebFetch"),
];

/// The name Claude Code gives the tool Satchel calls `name` (`Bash` for
/// `bash`, `mcp__server__tool` for an MCP import); `name` itself for a
/// tool Claude Code has no name for.
pub fn claude_name(name: &str, from_mcp: bool) -> String {
    if from_mcp {
        return format!("mcp__{name}");
    }
    ALIASES
        .iter()
        .find(|(ours, _)| *ours == name)
        .map_or_else(|| name.to_owned(), |(_, theirs)| (*theirs).to_owned())
}

/// Every name a matcher may use for the tool Satchel calls `name`.
pub fn tool_names(name: &str, from_mcp: bool) -> Vec<String> {
    let claude = claude_name(name, from_mcp);
    if claude == name {
        vec![claude]
    } else {
        vec![claude, name.to_owned()]
    }
}

/// Whether a matcher is only plain names joined by `|`.
fn is_plain(matcher: &str) -> bool {
    matcher
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '|' || c == '-')
}

/// Whether `matcher` can be used (a pattern that compiles).
pub(super) fn check(matcher: &str) -> Result<(), String> {
    if matcher.is_empty() || matcher == "*" || is_plain(matcher) {
        return Ok(());
    }
    Regex::new(matcher).map(drop).map_err(|e| e.to_string())
}

/// Whether `matcher` takes any of `names`.
pub fn matches(matcher: &str, names: &[&str]) -> bool {
    let matcher = matcher.trim();
    if matcher.is_empty() || matcher == "*" {
        return true;
    }
    if is_plain(matcher) {
        return matcher.split('|').any(|wanted| names.contains(&wanted));
    }
    match Regex::new(matcher) {
        Ok(pattern) => names.iter().any(|name| pattern.is_match(name)),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn takes(matcher: &str, tool: &str, mcp: bool) -> bool {
        let names = tool_names(tool, mcp);
        matches(
            matcher,
            &names.iter().map(String::as_str).collect::<Vec<_>>(),
        )
    }

    #[test]
    fn matchers_read_as_claude_code_reads_them() {
        assert!(takes("", "bash", false));
        assert!(takes("*", "memory", false));
        assert!(takes("Bash", "bash", false));
        assert!(takes("bash", "bash", false));
        assert!(!takes("Bash", "bashful", false));
        assert!(takes("Edit|Write", "write", false));
        assert!(!takes("Edit|Write", "read", false));
        assert!(takes("WebFetch", "fetch", false));
        assert!(takes("mcp__everything__.*", "everything__echo", true));
        assert!(!takes("mcp__everything__.*", "other__echo", true));
        assert!(takes("mcp__.*__echo", "everything__echo", true));
        assert!(takes("Notebook.*", "NotebookEdit", false));
        assert!(check("(").is_err());
        assert!(!matches("(", &["("]));
    }
}
