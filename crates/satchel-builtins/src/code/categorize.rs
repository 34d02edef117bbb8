//! What kind of error ended a failed run, read from its stderr: the same
//! categories for every language, recognised in each one's own words.

use std::fmt;

use super::runtime::Language;

/// Why a program failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Category {
    /// The code does not parse.
    Syntax,
    /// A module or package is missing.
    Import,
    /// A value of the wrong type was used.
    Type,
    /// A name that does not exist was used.
    Reference,
    /// The run hit its time limit.
    Timeout,
    /// A connection failed (or was refused by the sandbox).
    Network,
    /// Any other error the program raised.
    Runtime,
    /// It failed without saying how.
    Unknown,
}

impl Category {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Syntax => "syntax",
            Category::Import => "import",
            Category::Type => "type",
            Category::Reference => "reference",
            Category::Timeout => "timeout",
            Category::Network => "network",
            Category::Runtime => "runtime",
            Category::Unknown => "unknown",
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Signals, per category, in the order they are tried: network first (a
/// refused connection often surfaces as a generic runtime error), then the
/// language's own error names.
fn signatures(language: Language) -> &'static [(Category, &'static [&'static str])] {
    const NETWORK: &[&str] = &[
        "ECONNREFUSED",
        "ENOTFOUND",
        "EAI_AGAIN",
        "ENETUNREACH",
        "EACCES: permission denied, connect",
        "connect EACCES",
        "ConnectionRefused",
        "Unable to connect",
        "fetch failed",
        "NetworkError",
        "ConnectionRefusedError",
        "ConnectionError",
        "URLError",
        "gaierror",
        "Name or service not known",
        "Temporary failure in name resolution",
        "Network is unreachable",
        "Connection refused",
        "Could not resolve host",
        "Failed to connect",
        "connect: Permission denied",
    ];
    match language {
        Language::Python => &[
            (Category::Network, NETWORK),
            (
                Category::Syntax,
                &["SyntaxError", "IndentationError", "TabError"],
            ),
            (Category::Import, &["ModuleNotFoundError", "ImportError"]),
            (Category::Type, &["TypeError"]),
            (
                Category::Reference,
                &["NameError", "UnboundLocalError", "AttributeError"],
            ),
            (
                Category::Runtime,
                &["Traceback (most recent call last)", "Error:", "Exception"],
            ),
        ],
        Language::Javascript | Language::Typescript => &[
            (Category::Network, NETWORK),
            (
                Category::Syntax,
                &[
                    "SyntaxError",
                    "error: Unexpected",
                    "Expected \"",
                    "Expected identifier",
                    "Unterminated",
                    "ParseError",
                ],
            ),
            (
                Category::Import,
                &[
                    "Cannot find module",
                    "Cannot find package",
                    "ERR_MODULE_NOT_FOUND",
                    "Module not found",
                    "Could not resolve",
                    "error: Cannot find",
                ],
            ),
            (Category::Type, &["TypeError"]),
            (Category::Reference, &["ReferenceError"]),
            (Category::Runtime, &["Error", "error:", "Uncaught"]),
        ],
        Language::Bash => &[
            (Category::Network, NETWORK),
            (
                Category::Syntax,
                &["syntax error", "unexpected EOF", "unexpected end of file"],
            ),
            (
                Category::Reference,
                &[
                    "command not found",
                    "unbound variable",
                    "No such file or directory",
                ],
            ),
            (Category::Runtime, &[""]),
        ],
    }
}

/// The category of a failed run and the stderr line that shows it.
pub fn categorize(language: Language, stderr: &str, timed_out: bool) -> (Category, Option<String>) {
    if timed_out {
        return (Category::Timeout, None);
    }
    // A sandbox refuses sockets and connections with EACCES, which reads
    // like any permission error; "socket" or "connect" in the trace tells
    // them apart.
    let about_sockets = ["connect", "socket", "/dev/tcp/", "/dev/udp/"]
        .iter()
        .any(|word| stderr.contains(word));
    if about_sockets && stderr.contains("Permission denied") {
        let line = stderr
            .lines()
            .rev()
            .find(|l| l.contains("Permission denied"))
            .map(|l| l.trim().to_owned());
        return (Category::Network, line);
    }
    for (category, needles) in signatures(language) {
        for line in stderr.lines().rev() {
            if needles
                .iter()
                .any(|needle| !needle.is_empty() && line.contains(needle))
            {
                return (*category, Some(line.trim().to_owned()));
            }
        }
    }
    let last = stderr
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_owned);
    match (language, &last) {
        (Language::Bash, Some(_)) => (Category::Runtime, last),
        _ => (Category::Unknown, last),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_errors() {
        let cases = [
            (
                "  File \"<stdin>\", line 1\n    print(\n         ^\nSyntaxError: '(' was never closed",
                Category::Syntax,
            ),
            (
                "Traceback (most recent call last):\nModuleNotFoundError: No module named 'nope'",
                Category::Import,
            ),
            (
                "Traceback (most recent call last):\nTypeError: can only concatenate str",
                Category::Type,
            ),
            (
                "Traceback (most recent call last):\nNameError: name 'x' is not defined",
                Category::Reference,
            ),
            (
                "Traceback (most recent call last):\nValueError: boom",
                Category::Runtime,
            ),
            (
                "urllib.error.URLError: <urlopen error [Errno 111] Connection refused>",
                Category::Network,
            ),
        ];
        for (stderr, expected) in cases {
            assert_eq!(
                categorize(Language::Python, stderr, false).0,
                expected,
                "{stderr}"
            );
        }
    }

    #[test]
    fn javascript_errors() {
        let cases = [
            ("SyntaxError: Unexpected token ')'", Category::Syntax),
            (
                "error: Cannot find module 'nope' from '/tmp/x/[stdin]'",
                Category::Import,
            ),
            ("TypeError: undefined is not a function", Category::Type),
            ("ReferenceError: x is not defined", Category::Reference),
            ("error: boom\n    at <anonymous>", Category::Runtime),
            (
                "TypeError: fetch failed\n  cause: Error: connect ECONNREFUSED 127.0.0.1:9",
                Category::Network,
            ),
        ];
        for (stderr, expected) in cases {
            assert_eq!(
                categorize(Language::Javascript, stderr, false).0,
                expected,
                "{stderr}"
            );
        }
    }

    #[test]
    fn bash_errors_and_timeouts() {
        assert_eq!(
            categorize(
                Language::Bash,
                "bash: line 1: syntax error near unexpected token `fi'",
                false
            )
            .0,
            Category::Syntax
        );
        assert_eq!(
            categorize(
                Language::Bash,
                "bash: line 1: nope: command not found",
                false
            )
            .0,
            Category::Reference
        );
        assert_eq!(
            categorize(
                Language::Bash,
                "curl: (7) Failed to connect to x port 80",
                false
            )
            .0,
            Category::Network
        );
        assert_eq!(
            categorize(Language::Bash, "something odd", false).0,
            Category::Runtime
        );
        assert_eq!(
            categorize(Language::Python, "", true),
            (Category::Timeout, None)
        );
        assert_eq!(
            categorize(Language::Python, "", false),
            (Category::Unknown, None)
        );
    }
}
