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
//! computed at run time, a parse error) is [`ShellError::Opaque`]: callers
//! treat it as "ask".
//!
//! The parser recurses once per level of nesting, and so do the walker
//! here and the AST's `Drop`; a stack overflow aborts the whole process
//! (every MCP session with it) and cannot be caught. So a script longer than
//! [`MAX_SCRIPT_BYTES`], or nested deeper than [`MAX_NESTING`] levels (found
//! first by `nesting`, a scan without recursion), is
//! never parsed: it is [`ShellError::BeyondLimits`]. A script of at most
//! 256 bytes nested at most 8 levels (`INLINE_SCRIPT_BYTES`,
//! `INLINE_NESTING`) is parsed on the caller's stack; any other on a thread
//! of its own with a [`PARSE_STACK_BYTES`] stack, so the limit holds
//! whatever stack the caller has (a 2 MiB Tokio worker, say). Either way a
//! panic in the parser is an error, not a crash.
//!
//! Measured with `brush-parser` 0.4 (depth at which one construct nested
//! alone overflows; `bench`-profile and `dev`-profile builds):
//!
//! | construct                     | 2 MiB release | 8 MiB release | 2 MiB debug | 8 MiB debug |
//! |-------------------------------|---------------|---------------|-------------|-------------|
//! | `if`, `case`                  | 384           | 1,540         | 105-118     | 425-475     |
//! | `while`/`until`/`for`, `{ }`  | 377           | 1,513         | 110-121     | 445-486     |
//! | `f() { }`                     | 353           | 1,415         | 90          | 363         |
//! | `( ... )`                     | 377           | 1,513         | 121         | 486         |
//! | `<( )`                        | 432           | 1,734         | 127         | 513         |
//! | `$( )`, `"$( )"`              | 1,890         | 7,589         | 165         | 663         |
//! | `${x:-${x:-...}}`             | 1,518         | 6,091         | 125         | 504         |
//! | `[[ ( ( a ) ) ]]`, `[[ ! ! a ]]` | 2,370      | 9,519         | 218         | 880         |
//! | `[[ a && a && ... ]]`         | 16,319        | 65,471        | 3,932       | 15,848      |
//! | `$(( ((1)) ))`                | 5,020         | 20,144        | 1,681       | 6,788       |
//! | here-document in `$( )` in one | (walker stops at 8) |        | 389         | 1,570       |
//!
//! The worst is about 24 KiB of stack per level (debug) and 6 KiB
//! (release). Pipelines, `&&` lists, `;` sequences, `elif` chains and
//! `! ! cmd` do not recurse (100,000 stages parse), nor does a 1 MB word.
//! [`MAX_NESTING`] levels of the worst construct need about 2.4 MiB in a
//! debug build: 13 times less than the parsing thread's stack, 50 times
//! less in a release build.

use brush_parser::ast::{
    self, Command, CommandPrefixOrSuffixItem, CompoundCommand, CompoundList, ExtendedTestExpr,
    IoFileRedirectTarget, IoRedirect,
};
use brush_parser::word::{self, WordPiece, WordPieceWithSource};
use brush_parser::{Parser, ParserOptions};

use super::nesting::{MAX_CASE_NESTING, nesting_depth};

/// How deep `bash -c`, `eval` and substitutions may nest before we give up.
const MAX_DEPTH: usize = 8;

/// How deeply constructs (`if`, `(`, `$(`, `{`, `"`, `[[`...) may nest in
/// a script we parse; `bash -c` and `eval` scripts count with the script
/// around them.
pub const MAX_NESTING: usize = 100;

/// The longest script we parse, in bytes.
pub const MAX_SCRIPT_BYTES: usize = 1 << 20;

/// The stack of the thread each parse runs on. Only the pages a parse
/// touches are ever backed by memory.
pub const PARSE_STACK_BYTES: usize = 32 << 20;

/// Why a script's commands cannot be listed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShellError {
    /// Not everything the script runs can be known before it runs (a
    /// command name computed at run time, a parse error). Policy asks.
    #[error("{0}")]
    Opaque(String),
    /// The script is beyond what may be parsed safely: nested deeper than
    /// [`MAX_NESTING`] or longer than [`MAX_SCRIPT_BYTES`]. Policy refuses
    /// it as invalid input, whatever the rules say.
    #[error("{0}")]
    BeyondLimits(String),
}

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
///
/// # Caveats
/// Blocks the caller while it parses (tens of microseconds for an
/// ordinary script; a deeply nested one on a thread of its own, up to
/// about a second for a 1 MB one in a debug build); call it where
/// blocking is acceptable.
pub fn simple_commands(script: &str) -> Result<Vec<ShellCommand>, ShellError> {
    if script.len() > MAX_SCRIPT_BYTES {
        return Err(ShellError::BeyondLimits(format!(
            "the script is {} bytes long, more than the {MAX_SCRIPT_BYTES} bytes that can be checked before it runs",
            script.len()
        )));
    }
    // Most commands are short and nest a level or two: walked on the
    // caller's stack, as long as they stay within INLINE_NESTING (a few
    // hundred KiB of stack at most in a debug build), they need no thread
    // of their own (~0.1 ms each).
    if script.len() <= INLINE_SCRIPT_BYTES {
        let mut inline = Walker::new(INLINE_NESTING);
        let mut found = Vec::new();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            inline.script(script, &mut found)
        })) {
            Ok(_) if inline.overflowed => {}
            Ok(result) => return result.map(|()| found),
            Err(panic) => return Err(parser_panicked(panic.as_ref())),
        }
    }
    std::thread::scope(|scope| {
        let parse = std::thread::Builder::new()
            .name("satchel-shell-parse".into())
            .stack_size(PARSE_STACK_BYTES)
            .spawn_scoped(scope, || {
                let mut found = Vec::new();
                Walker::new(MAX_NESTING).script(script, &mut found)?;
                Ok(found)
            });
        match parse {
            Ok(parse) => parse
                .join()
                .unwrap_or_else(|panic| Err(parser_panicked(panic.as_ref()))),
            Err(error) => Err(ShellError::Opaque(format!(
                "no thread to parse it on: {error}"
            ))),
        }
    })
}

/// How deeply a script may nest and still be walked on the caller's stack.
const INLINE_NESTING: usize = 8;

/// The longest script walked on the caller's stack: constructs the
/// nesting scan does not count (a chain of `coproc`s) stay shallow in it.
const INLINE_SCRIPT_BYTES: usize = 256;

/// Wrappers (`env`, `sudo`, `nice`...) looked through around one command.
const MAX_WRAPPERS: usize = 16;

/// `coproc` words in one script, at most: each nests the command after it
/// one level deeper in the parser, and the nesting scan does not count them.
const MAX_COPROCS: usize = 16;

/// A panic in the parser, as the error the caller gets.
fn parser_panicked(panic: &(dyn std::any::Any + Send)) -> ShellError {
    let reason = crate::registry::panic_message(panic);
    tracing::error!(%reason, "the shell parser panicked");
    ShellError::Opaque(format!("the shell parser failed on it: {reason}"))
}

/// A word after quote removal: its text, and whether any part of it is
/// only known at run time.
struct Expanded {
    text: String,
    dynamic: bool,
}

struct Walker {
    /// Scripts within scripts (`$(...)`, `bash -c`, `eval`) entered.
    depth: usize,
    /// Levels of nesting the scripts entered may hold, at most: the stack
    /// the walk may need is bounded by this, whatever the parser does.
    nesting: usize,
    /// The most `nesting` may reach: [`MAX_NESTING`] on the parsing
    /// thread, [`INLINE_NESTING`] on the caller's stack.
    limit: usize,
    /// Set when a script nests deeper than a `limit` below [`MAX_NESTING`]:
    /// the walk's result means nothing, and the thread walks it again.
    overflowed: bool,
}

impl Walker {
    fn new(limit: usize) -> Walker {
        Walker {
            depth: 0,
            nesting: 0,
            limit,
            overflowed: false,
        }
    }

    fn options() -> ParserOptions {
        ParserOptions::default()
    }

    fn script(&mut self, script: &str, found: &mut Vec<ShellCommand>) -> Result<(), ShellError> {
        if self.depth > MAX_DEPTH {
            return Err(ShellError::Opaque(
                "commands nested too deeply to analyse".into(),
            ));
        }
        let coprocs = script.matches("coproc").count();
        if coprocs > MAX_COPROCS {
            return Err(ShellError::BeyondLimits(format!(
                "the script has {coprocs} `coproc`s, more than the {MAX_COPROCS} that can be \
                 checked before it runs"
            )));
        }
        let budget = self.limit.saturating_sub(self.nesting);
        let nesting = nesting_depth(script, budget).map_err(|too_deep| {
            self.overflowed |= self.limit < MAX_NESTING;
            let what = if too_deep.case {
                format!("`case` statements deeper than {MAX_CASE_NESTING} levels")
            } else {
                format!("commands, quotes or substitutions deeper than {MAX_NESTING} levels")
            };
            ShellError::BeyondLimits(format!(
                "the script nests {what} (passed at byte {} of `{}`), so it cannot be checked \
                 before it runs",
                too_deep.offset,
                preview(script)
            ))
        })?;
        self.depth += 1;
        self.nesting += nesting;
        let program = Parser::new(script.as_bytes(), &Walker::options())
            .parse_program()
            .map_err(|error| ShellError::Opaque(format!("cannot parse the command: {error}")))?;
        for list in &program.complete_commands {
            self.list(list, found)?;
        }
        self.depth -= 1;
        self.nesting -= nesting;
        Ok(())
    }

    fn list(
        &mut self,
        list: &CompoundList,
        found: &mut Vec<ShellCommand>,
    ) -> Result<(), ShellError> {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            for (_, pipeline) in and_or.iter() {
                for command in &pipeline.seq {
                    self.command(command, found)?;
                }
            }
        }
        Ok(())
    }

    fn command(
        &mut self,
        command: &Command,
        found: &mut Vec<ShellCommand>,
    ) -> Result<(), ShellError> {
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
    ) -> Result<(), ShellError> {
        match compound {
            CompoundCommand::Arithmetic(arithmetic) => {
                arithmetic_command(&arithmetic.expr.value)?;
                self.arithmetic(&arithmetic.expr.value)
            }
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
    ) -> Result<(), ShellError> {
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
    fn arithmetic(&mut self, text: &str) -> Result<(), ShellError> {
        if text.contains("$(") || text.contains('`') {
            return Err(ShellError::Opaque(
                "a command substitution inside arithmetic".into(),
            ));
        }
        Ok(())
    }

    fn redirect(
        &mut self,
        redirect: &IoRedirect,
        found: &mut Vec<ShellCommand>,
    ) -> Result<(), ShellError> {
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
    ) -> Result<(), ShellError> {
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
    ) -> Result<(), ShellError> {
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
        mut words: Vec<Expanded>,
        found: &mut Vec<ShellCommand>,
    ) -> Result<(), ShellError> {
        // A loop, not recursion: `env env env ... x` must not grow the stack.
        for _ in 0..=MAX_WRAPPERS {
            let Some(first) = words.first() else {
                return Ok(());
            };
            if first.dynamic {
                return Err(ShellError::Opaque(format!(
                    "the command name `{}` is only known at run time",
                    first.text
                )));
            }
            let texts: Vec<String> = words.iter().map(|w| w.text.clone()).collect();
            found.push(ShellCommand {
                words: texts.clone(),
            });
            let name = basename(&texts[0]);
            match name {
                "bash" | "sh" | "dash" | "zsh" | "ksh" | "busybox" => {
                    return self.shell_c(&words, found);
                }
                "eval" => {
                    if words[1..].iter().any(|w| w.dynamic) {
                        return Err(ShellError::Opaque(
                            "`eval` of text only known at run time".into(),
                        ));
                    }
                    return self.script(&texts[1..].join(" "), found);
                }
                _ => match wrapped_command(name, &texts[1..]) {
                    Some(Ok(start)) if start < words.len() - 1 => {
                        words = words.into_iter().skip(start + 1).collect();
                    }
                    Some(Ok(_)) | None => return Ok(()),
                    Some(Err(reason)) => return Err(ShellError::Opaque(reason)),
                },
            }
        }
        Err(ShellError::Opaque(format!(
            "more than {MAX_WRAPPERS} wrappers (`env`, `sudo`, `timeout`...) around one command"
        )))
    }

    /// `bash -c 'script' ...`: analyse the script too.
    fn shell_c(
        &mut self,
        words: &[Expanded],
        found: &mut Vec<ShellCommand>,
    ) -> Result<(), ShellError> {
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
                    return Err(ShellError::Opaque(format!(
                        "`{} -c` runs text only known at run time",
                        words[0].text
                    )));
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
    fn word(&mut self, raw: &str, found: &mut Vec<ShellCommand>) -> Result<Expanded, ShellError> {
        let pieces = word::parse(raw, &Walker::options())
            .map_err(|error| ShellError::Opaque(format!("cannot parse `{raw}`: {error}")))?;
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
    ) -> Result<(), ShellError> {
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

/// The start of a script, for a message: at most 40 characters, on one line.
fn preview(script: &str) -> String {
    let line = script.lines().next().unwrap_or_default();
    let (head, _) = satchel_core::text::char_prefix(line, 40);
    if head.len() < script.len() {
        format!("{head}...")
    } else {
        head.to_owned()
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

/// A `(( ... ))` command is arithmetic only when it has an operator or a
/// number, no inner parentheses and no two names side by side: bash reads
/// `( ( rm x ) )`
/// (with a space) as two nested subshells running `rm x`, which the parser
/// takes for arithmetic; such text is not judged, it is asked about.
fn arithmetic_command(expr: &str) -> Result<(), ShellError> {
    let names_side_by_side = expr
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c.is_whitespace() || c == '-'))
        .any(|part| {
            part.split_whitespace()
                .filter(|word| !word.is_empty())
                .count()
                > 1
        });
    // `(( x ))` alone is as likely to be `( ( x ) )`, a command.
    let operates = expr
        .chars()
        .any(|c| c.is_ascii_digit() || "+-*/%<>=!&|^~?:,".contains(c));
    if expr.contains('(') || names_side_by_side || !operates {
        return Err(ShellError::Opaque(format!(
            "`(( {} ))` may be nested subshells rather than arithmetic",
            expr.trim()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
