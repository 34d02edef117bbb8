//! Permission rules as users write them: `memory`, `mcp_github__*`,
//! `bash(git status*)`.

use std::fmt;
use std::path::PathBuf;

use super::shell::basename;

/// The built-in tools whose rules take a path pattern (`edit(src/**)`,
/// `read(.env)`), matched against the path the call names.
pub(crate) const PATH_TOOLS: &[&str] = &["read", "write", "edit", "glob", "grep"];

/// Which list a rule is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RuleKind {
    /// Refuse the call.
    Deny,
    /// Ask the user first.
    Ask,
    /// Run it without asking.
    Allow,
}

impl fmt::Display for RuleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RuleKind::Deny => "deny",
            RuleKind::Ask => "ask",
            RuleKind::Allow => "allow",
        })
    }
}

/// One rule: a tool-name pattern, optionally with a pattern for the
/// command (for `bash`) in parentheses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The list it is in.
    pub kind: RuleKind,
    /// The rule as written.
    pub text: String,
    /// The file it came from, when it came from one.
    pub origin: Option<PathBuf>,
    tool: String,
    argument: Option<String>,
}

impl Rule {
    /// Parses `tool` or `tool(pattern)`; `*` matches any run of characters.
    pub fn parse(kind: RuleKind, text: &str, origin: Option<PathBuf>) -> Result<Rule, String> {
        let trimmed = text.trim();
        let (tool, argument) = match trimmed.split_once('(') {
            Some((tool, rest)) => {
                let Some(argument) = rest.strip_suffix(')') else {
                    return Err(format!(
                        "rule `{text}` opens a parenthesis it does not close"
                    ));
                };
                (tool.trim(), Some(argument.trim().to_owned()))
            }
            None => (trimmed, None),
        };
        if tool.is_empty()
            || !tool
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-*".contains(&b))
        {
            return Err(format!(
                "rule `{text}`: `{tool}` is not a tool name or pattern"
            ));
        }
        if argument.is_some() && tool != "bash" && !PATH_TOOLS.contains(&tool) {
            return Err(format!(
                "rule `{text}`: only `bash(...)` rules take a command pattern, and only the file tools' \
                 ({}) a path pattern",
                PATH_TOOLS.join(", ")
            ));
        }
        Ok(Rule {
            kind,
            text: trimmed.to_owned(),
            origin,
            tool: tool.to_owned(),
            argument,
        })
    }

    /// True when the rule names this tool (whatever its arguments).
    pub fn matches_tool(&self, tool: &str) -> bool {
        glob_matches(&self.tool, tool)
    }

    /// True when the rule applies to the whole call, not one command.
    pub fn is_tool_wide(&self) -> bool {
        self.argument.is_none()
    }

    /// True when the rule's command pattern matches a command line. A
    /// pattern ending in ` *` also matches the bare command (`rm *` matches
    /// `rm`), and commands given by path match by name (`/bin/rm` as `rm`).
    pub fn matches_command(&self, command: &str) -> bool {
        let Some(pattern) = &self.argument else {
            return true;
        };
        let by_name = match command.split_once(' ') {
            Some((program, rest)) => format!("{} {rest}", basename(program)),
            None => basename(command).to_owned(),
        };
        [command, by_name.as_str()].iter().any(|candidate| {
            glob_matches(pattern, candidate)
                || pattern
                    .strip_suffix(" *")
                    .is_some_and(|bare| glob_matches(bare, candidate))
        })
    }
}

impl Rule {
    /// True when the rule's path pattern matches `path`, as the call gives
    /// it or any tail of it after a `/` (so `src/**` matches
    /// `/home/me/project/src/a.rs` and `./src/a.rs`); a leading `./` is
    /// ignored. Without a pattern, every path.
    pub fn matches_path(&self, path: &str) -> bool {
        let Some(pattern) = &self.argument else {
            return true;
        };
        let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
        let path = path.strip_prefix("./").unwrap_or(path);
        glob_matches(pattern, path)
            || path
                .match_indices('/')
                .any(|(at, _)| glob_matches(pattern, &path[at + 1..]))
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} rule `{}`", self.kind, self.text)?;
        if let Some(origin) = &self.origin {
            write!(f, " (in {})", origin.display())?;
        }
        Ok(())
    }
}

/// Matches `text` against `pattern`, where `*` matches any run of
/// characters (including none) and everything else matches itself.
pub fn glob_matches(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let [first, middle @ .., last] = parts.as_slice() else {
        return pattern == text;
    };
    if parts.len() == 1 {
        return pattern == text;
    }
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(text: &str) -> Rule {
        Rule::parse(RuleKind::Deny, text, None).unwrap()
    }

    #[test]
    fn globs() {
        assert!(glob_matches("mcp_github__*", "mcp_github__create_issue"));
        assert!(!glob_matches("mcp_github__*", "mcp_gitlab__x"));
        assert!(glob_matches("*", ""));
        assert!(glob_matches("a*b*c", "a-b-c"));
        assert!(!glob_matches("a*b*c", "a-c-b"));
        assert!(glob_matches("memory", "memory"));
        assert!(!glob_matches("memory", "memory2"));
        assert!(!glob_matches("ab*ba", "aba"));
    }

    #[test]
    fn command_patterns() {
        let rm = rule("bash(rm *)");
        assert!(rm.matches_tool("bash"));
        assert!(rm.matches_command("rm -rf /"));
        assert!(rm.matches_command("rm"));
        assert!(rm.matches_command("/bin/rm -rf /"));
        assert!(!rm.matches_command("rmdir x"));
        assert!(!rm.matches_command("echo rm"));
        let status = rule("bash(git status*)");
        assert!(status.matches_command("git status"));
        assert!(status.matches_command("git status --short"));
        assert!(!status.matches_command("git push"));
    }

    #[test]
    fn bad_rules_say_why() {
        assert!(
            Rule::parse(RuleKind::Allow, "bash(ls", None)
                .unwrap_err()
                .contains("does not close")
        );
        assert!(
            Rule::parse(RuleKind::Allow, "memory(x)", None)
                .unwrap_err()
                .contains("only `bash(...)`")
        );
        assert!(Rule::parse(RuleKind::Allow, "has space", None).is_err());
    }
}
