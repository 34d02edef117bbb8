//! Every simple command a bash script would run, found by parsing it (with
//! `brush-parser`), never by matching strings.
//!
//! Looks inside `a && b`, `a; b`, pipes, newlines, subshells, brace groups,
//! loops and conditionals, function bodies, `$(...)` and backticks (also
//! inside double quotes, assignments and redirections), process
//! substitutions, `bash -c '...'` and `eval '...'`, and through wrappers
//! such as `env X=1 cmd`, `sudo`, `xargs`, `timeout`, `nohup`. Quotes and
//! escapes are removed the way bash removes them, so `r''m` is `rm`.
//! Whatever cannot be known without running the script (a command name
//! computed at run time, a parse error) is an error: callers treat it as
//! "ask".

use brush_parser::ast::{
    self, Command, CommandPrefixOrSuffixItem, CompoundCommand, CompoundList, ExtendedTestExpr,
    IoFileRedirectTarget, IoRedirect,
};
use brush_parser::word::{self, WordPiece, WordPieceWithSource};
use brush_parser::{Parser, ParserOptions};

/// How deep `bash -c`, `eval` and substitutions may nest before we give up.
const MAX_DEPTH: usize = 8;

/// One simple command, its words with quotes removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellCommand {
    /// The command name and its arguments. Parts only known at run time
    /// (`$HOME`, `$(date)`) are kept as written.
    pub words: Vec<String>,
}

impl ShellCommand {
    /// The words joined by single spaces: what rules are matched against.
    pub fn text(&self) -> String {
        self.words.join(" ")
    }
}

/// Every simple command in `script`, in order; an error says why the
/// script cannot be analysed without running it.
pub fn simple_commands(script: &str) -> Result<Vec<ShellCommand>, String> {
    let mut found = Vec::new();
    Walker { depth: 0 }.script(script, &mut found)?;
    Ok(found)
}

/// A word after quote removal: its text, and whether any part of it is
/// only known at run time.
struct Expanded {
    text: String,
    dynamic: bool,
}

struct Walker {
    depth: usize,
}

impl Walker {
    fn options() -> ParserOptions {
        ParserOptions::default()
    }

    fn script(&mut self, script: &str, found: &mut Vec<ShellCommand>) -> Result<(), String> {
        if self.depth > MAX_DEPTH {
            return Err("commands nested too deeply to analyse".into());
        }
        self.depth += 1;
        let program = Parser::new(script.as_bytes(), &Walker::options())
            .parse_program()
            .map_err(|error| format!("cannot parse the command: {error}"))?;
        for list in &program.complete_commands {
            self.list(list, found)?;
        }
        self.depth -= 1;
        Ok(())
    }

    fn list(&mut self, list: &CompoundList, found: &mut Vec<ShellCommand>) -> Result<(), String> {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            for (_, pipeline) in and_or.iter() {
                for command in &pipeline.seq {
                    self.command(command, found)?;
                }
            }
        }
        Ok(())
    }

    fn command(&mut self, command: &Command, found: &mut Vec<ShellCommand>) -> Result<(), String> {
        match command {
            Command::Simple(simple) => self.simple(simple, found),
            Command::Compound(compound, redirects) => {
                for redirect in redirects.iter().flat_map(|r| &r.0) {
                    self.redirect(redirect, found)?;
                }
                self.compound(compound, found)
            }
            Command::Function(function) => {
                for redirect in function.body.1.iter().flat_map(|r| &r.0) {
                    self.redirect(redirect, found)?;
                }
                self.compound(&function.body.0, found)
            }
            Command::ExtendedTest(test, redirects) => {
                for redirect in redirects.iter().flat_map(|r| &r.0) {
                    self.redirect(redirect, found)?;
                }
                self.extended_test(&test.expr, found)
            }
        }
    }

    fn compound(
        &mut self,
        compound: &CompoundCommand,
        found: &mut Vec<ShellCommand>,
    ) -> Result<(), String> {
        match compound {
            CompoundCommand::Arithmetic(arithmetic) => self.arithmetic(&arithmetic.expr.value),
            CompoundCommand::ArithmeticForClause(clause) => {
                for expr in [&clause.initializer, &clause.condition, &clause.updater]
                    .into_iter()
                    .flatten()
                {
                    self.arithmetic(&expr.value)?;
                }
                self.list(&clause.body.list, found)
            }
            CompoundCommand::BraceGroup(group) => self.list(&group.list, found),
            CompoundCommand::Subshell(subshell) => self.list(&subshell.list, found),
            CompoundCommand::ForClause(clause) => {
                for value in clause.values.iter().flatten() {
                    self.word(&value.value, found)?;
                }
                self.list(&clause.body.list, found)
            }
            CompoundCommand::CaseClause(clause) => {
                self.word(&clause.value.value, found)?;
                for item in &clause.cases {
                    for pattern in &item.patterns {
                        self.word(&pattern.value, found)?;
                    }
                    if let Some(list) = &item.cmd {
                        self.list(list, found)?;
                    }
                }
                Ok(())
            }
            CompoundCommand::IfClause(clause) => {
                self.list(&clause.condition, found)?;
                self.list(&clause.then, found)?;
                for branch in clause.elses.iter().flatten() {
                    if let Some(condition) = &branch.condition {
                        self.list(condition, found)?;
                    }
                    self.list(&branch.body, found)?;
                }
                Ok(())
            }
            CompoundCommand::WhileClause(clause) | CompoundCommand::UntilClause(clause) => {
                self.list(&clause.0, found)?;
                self.list(&clause.1.list, found)
            }
            CompoundCommand::Coprocess(coprocess) => self.command(&coprocess.body, found),
        }
    }

    fn extended_test(
        &mut self,
        expr: &ExtendedTestExpr,
        found: &mut Vec<ShellCommand>,
    ) -> Result<(), String> {
        match expr {
            ExtendedTestExpr::And(a, b) | ExtendedTestExpr::Or(a, b) => {
                self.extended_test(a, found)?;
                self.extended_test(b, found)
            }
            ExtendedTestExpr::Not(inner) | ExtendedTestExpr::Parenthesized(inner) => {
                self.extended_test(inner, found)
            }
            ExtendedTestExpr::UnaryTest(_, word) => self.word(&word.value, found).map(drop),
            ExtendedTestExpr::BinaryTest(_, left, right) => {
                self.word(&left.value, found)?;
                self.word(&right.value, found).map(drop)
            }
        }
    }

    /// Arithmetic can hide command substitutions; those we refuse to guess at.
    fn arithmetic(&mut self, text: &str) -> Result<(), String> {
        if text.contains("$(") || text.contains('`') {
            return Err("a command substitution inside arithmetic".into());
        }
        Ok(())
    }

    fn redirect(
        &mut self,
        redirect: &IoRedirect,
        found: &mut Vec<ShellCommand>,
    ) -> Result<(), String> {
        match redirect {
            IoRedirect::File(_, _, target) => match target {
                IoFileRedirectTarget::Filename(word) | IoFileRedirectTarget::Duplicate(word) => {
                    self.word(&word.value, found).map(drop)
                }
                IoFileRedirectTarget::Fd(_) => Ok(()),
                IoFileRedirectTarget::ProcessSubstitution(_, subshell) => {
                    self.list(&subshell.list, found)
                }
            },
            IoRedirect::HereDocument(_, here) => {
                if here.requires_expansion {
                    self.word(
                        &format!("\"{}\"", here.doc.value.replace('"', "\\\"")),
                        found,
                    )?;
                }
                Ok(())
            }
            IoRedirect::HereString(_, word) | IoRedirect::OutputAndError(word, _) => {
                self.word(&word.value, found).map(drop)
            }
        }
    }

    fn simple(
        &mut self,
        simple: &ast::SimpleCommand,
        found: &mut Vec<ShellCommand>,
    ) -> Result<(), String> {
        for item in simple.prefix.iter().flat_map(|p| &p.0) {
            self.prefix_or_suffix(item, &mut Vec::new(), found)?;
        }
        let mut words = Vec::new();
        if let Some(name) = &simple.word_or_name {
            words.push(self.word(&name.value, found)?);
        }
        for item in simple.suffix.iter().flat_map(|s| &s.0) {
            self.prefix_or_suffix(item, &mut words, found)?;
        }
        self.invocation(words, found)
    }

    fn prefix_or_suffix(
        &mut self,
        item: &CommandPrefixOrSuffixItem,
        words: &mut Vec<Expanded>,
        found: &mut Vec<ShellCommand>,
    ) -> Result<(), String> {
        match item {
            CommandPrefixOrSuffixItem::IoRedirect(redirect) => self.redirect(redirect, found),
            CommandPrefixOrSuffixItem::Word(word) => {
                words.push(self.word(&word.value, found)?);
                Ok(())
            }
            // Before the command name an assignment runs nothing itself (the
            // caller discards `words` there); after it, `X=1` is an argument
            // (as to `env`). Either way its value may run a substitution.
            CommandPrefixOrSuffixItem::AssignmentWord(_, word) => {
                words.push(self.word(&word.value, found)?);
                Ok(())
            }
            CommandPrefixOrSuffixItem::ProcessSubstitution(_, subshell) => {
                self.list(&subshell.list, found)
            }
        }
    }

    /// A command line after expansion: records it, then looks through
    /// wrappers (`env`, `sudo`, `bash -c`...) at what they run.
    fn invocation(
        &mut self,
        words: Vec<Expanded>,
        found: &mut Vec<ShellCommand>,
    ) -> Result<(), String> {
        let Some(first) = words.first() else {
            return Ok(());
        };
        if first.dynamic {
            return Err(format!(
                "the command name `{}` is only known at run time",
                first.text
            ));
        }
        let texts: Vec<String> = words.iter().map(|w| w.text.clone()).collect();
        found.push(ShellCommand {
            words: texts.clone(),
        });
        let name = basename(&texts[0]);
        match name {
            "bash" | "sh" | "dash" | "zsh" | "ksh" | "busybox" => self.shell_c(&words, found),
            "eval" => {
                if words[1..].iter().any(|w| w.dynamic) {
                    return Err("`eval` of text only known at run time".into());
                }
                self.script(&texts[1..].join(" "), found)
            }
            _ => match wrapped_command(name, &texts[1..]) {
                Some(Ok(start)) if start < words.len() - 1 => {
                    let inner: Vec<Expanded> = words.into_iter().skip(start + 1).collect();
                    self.invocation(inner, found)
                }
                Some(Ok(_)) | None => Ok(()),
                Some(Err(reason)) => Err(reason),
            },
        }
    }

    /// `bash -c 'script' ...`: analyse the script too.
    fn shell_c(&mut self, words: &[Expanded], found: &mut Vec<ShellCommand>) -> Result<(), String> {
        let mut index = 1;
        while let Some(word) = words.get(index) {
            let text = &word.text;
            if text == "--" || !text.starts_with('-') {
                return Ok(());
            }
            if text.starts_with('-') && !text.starts_with("--") && text.contains('c') {
                let Some(script) = words.get(index + 1) else {
                    return Ok(());
                };
                if script.dynamic {
                    return Err(format!(
                        "`{} -c` runs text only known at run time",
                        words[0].text
                    ));
                }
                return self.script(&script.text, found);
            }
            // Options with an argument: -o opt, +O shopt.
            index += if matches!(text.as_str(), "-o" | "-O") {
                2
            } else {
                1
            };
        }
        Ok(())
    }

    /// Removes quotes and escapes from a word, analysing any command it
    /// substitutes.
    fn word(&mut self, raw: &str, found: &mut Vec<ShellCommand>) -> Result<Expanded, String> {
        let pieces = word::parse(raw, &Walker::options())
            .map_err(|error| format!("cannot parse `{raw}`: {error}"))?;
        let mut expanded = Expanded {
            text: String::new(),
            dynamic: false,
        };
        self.pieces(raw, &pieces, &mut expanded, found)?;
        Ok(expanded)
    }

    fn pieces(
        &mut self,
        raw: &str,
        pieces: &[WordPieceWithSource],
        out: &mut Expanded,
        found: &mut Vec<ShellCommand>,
    ) -> Result<(), String> {
        for WordPieceWithSource {
            piece,
            start_index,
            end_index,
        } in pieces
        {
            let source = raw.get(*start_index..*end_index).unwrap_or_default();
            match piece {
                WordPiece::Text(text) | WordPiece::SingleQuotedText(text) => {
                    out.text.push_str(text)
                }
                WordPiece::AnsiCQuotedText(text) => {
                    if text.contains('\\') {
                        // Escapes like \x72 spell characters; we will not decode them.
                        out.dynamic = true;
                    }
                    out.text.push_str(text);
                }
                WordPiece::EscapeSequence(escape) => out
                    .text
                    .push_str(escape.strip_prefix('\\').unwrap_or(escape)),
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    self.pieces(raw, inner, out, found)?;
                }
                WordPiece::TildeExpansion(_) | WordPiece::ParameterExpansion(_) => {
                    out.dynamic = true;
                    out.text.push_str(source);
                }
                WordPiece::CommandSubstitution(script)
                | WordPiece::BackquotedCommandSubstitution(script) => {
                    self.script(script, found)?;
                    out.dynamic = true;
                    out.text.push_str(source);
                }
                WordPiece::ArithmeticExpression(expr) => {
                    self.arithmetic(&expr.value)?;
                    out.dynamic = true;
                    out.text.push_str(source);
                }
            }
        }
        Ok(())
    }
}

/// The last path component: `/bin/rm` → `rm`.
pub fn basename(command: &str) -> &str {
    command.rsplit('/').next().unwrap_or(command)
}

/// For a command that runs another command (`env`, `sudo`, `xargs`...), the
/// index in `args` of the last word before the wrapped command; `None` for
/// an ordinary command.
fn wrapped_command(name: &str, args: &[String]) -> Option<Result<usize, String>> {
    // Options taking a separate argument, per wrapper.
    let (with_argument, positional): (&[&str], usize) = match name {
        "env" => (&["-u", "--unset", "-C", "--chdir"], 0),
        "sudo" | "doas" => (
            &[
                "-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "--user", "--group",
            ],
            0,
        ),
        "xargs" => (
            &[
                "-I",
                "-i",
                "-n",
                "-P",
                "-d",
                "-L",
                "-l",
                "-s",
                "-a",
                "-E",
                "-e",
                "--max-args",
                "--max-procs",
                "--delimiter",
            ],
            0,
        ),
        "timeout" => (&["-s", "--signal", "-k", "--kill-after"], 1),
        "nice" => (&["-n", "--adjustment"], 0),
        "stdbuf" => (&["-i", "-o", "-e"], 0),
        "ionice" => (&["-c", "-n", "-p"], 0),
        "nohup" | "setsid" | "time" | "command" | "builtin" | "exec" | "chrt" | "taskset"
        | "unbuffer" | "caffeinate" => (&[], 0),
        _ => return None,
    };
    if name == "env"
        && args
            .iter()
            .any(|a| a == "-S" || a.starts_with("--split-string"))
    {
        return Some(Err(
            "`env -S` splits a string into a command we will not guess at".into(),
        ));
    }
    let mut index = 0;
    while let Some(arg) = args.get(index) {
        if arg == "--" {
            index += 1;
            break;
        }
        if arg.starts_with('-') && arg.len() > 1 {
            index += if with_argument.contains(&arg.as_str()) {
                2
            } else {
                1
            };
            continue;
        }
        if name == "env" && arg.contains('=') {
            index += 1;
            continue;
        }
        break;
    }
    // Positional arguments before the command (timeout's DURATION).
    index += positional;
    // `index` is the position of the wrapped command within args; the
    // caller wants it within the whole command line.
    Some(Ok(index))
}

#[cfg(test)]
mod tests {
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
}
