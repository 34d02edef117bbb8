//! How deeply a bash script nests, found by one pass over its bytes with an
//! explicit stack, before `brush-parser` (which recurses once per level, and
//! whose AST our walker and `Drop` recurse over again) may see it.
//!
//! A stack overflow aborts the whole process, so it cannot be caught; it has
//! to be prevented. The count is deliberately an upper bound: every
//! construct that may open a level in the parser opens one here (`(`,
//! `$(`, `<(`, `$((`, `${`, `"`, backticks, `{`, `if`, `while`, `until`,
//! `for`, `select`, `case`, `[[` and each `!`, `&&`, `||` inside it, the
//! commands inside here-documents), and a level closes only on a closer of
//! the same kind in a place the parser would read it as one. Where the two
//! disagree the count is too high, never too low: a strange script may be
//! refused, a deep one is never let through.

/// What one level on the scan's stack is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// `(`, `$(`, `<(`, `@(`...; `arith` inside `((`/`$((`, where `<<` is a shift.
    Paren { arith: bool },
    /// A brace group `{ ...; }`.
    Brace,
    /// `${...}`.
    Param,
    /// `"..."`.
    Double,
    /// `` `...` ``.
    Backtick,
    /// `if ... fi`.
    If,
    /// `while`/`until`/`for`/`select` ... `done`.
    Loop,
    /// `case ... esac`.
    Case(CaseState),
    /// `[[ ... ]]`.
    Test,
    /// `!`, `&&` or `||` inside `[[ ]]`: each nests the expression tree.
    TestOperator,
}

/// Where a `case` is: before `in`, reading a pattern, or in a branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CaseState {
    Head,
    Pattern,
    Body,
}

/// How text outside every frame is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bottom {
    /// Commands.
    Code,
    /// The body of an unquoted here-document: like double quotes, without
    /// the closing quote.
    HereBody,
}

/// A here-document whose body starts after the next newline.
struct PendingHereDoc {
    delimiter: Vec<u8>,
    strip_tabs: bool,
    expands: bool,
}

/// How many `case` statements may nest in one script. `brush-parser`
/// backtracks over an unfinished nested `case` in time exponential in its
/// depth (measured: an unterminated 20-deep nest takes 1.8 s in a release
/// build, each further level doubles it), so a script cut short could hold
/// a thread for ever; 8 levels cost at most a few milliseconds.
pub(crate) const MAX_CASE_NESTING: usize = 8;

/// Why a script was not scanned to the end: it nests deeper than allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooDeep {
    /// Byte offset in the script where the limit was passed.
    pub(crate) offset: usize,
    /// True when it was [`MAX_CASE_NESTING`] that was passed.
    pub(crate) case: bool,
}

/// The deepest nesting in `script`, or [`TooDeep`] as soon as it passes
/// `limit` (or `case` statements nest deeper than [`MAX_CASE_NESTING`]).
/// Linear in the script's length, whatever it holds.
pub(crate) fn nesting_depth(script: &str, limit: usize) -> Result<usize, TooDeep> {
    Scan::new(script.as_bytes(), 0, 0, limit, Bottom::Code).run()
}

struct Scan<'a> {
    bytes: &'a [u8],
    /// Offset of `bytes` in the whole script (here-document bodies).
    origin: usize,
    pos: usize,
    stack: Vec<Frame>,
    /// Levels already open around this text (here-document bodies).
    base: usize,
    /// `case` statements among them.
    base_cases: usize,
    limit: usize,
    deepest: usize,
    bottom: Bottom,
    /// True where a word would be a command name (so a reserved word counts).
    command: bool,
    /// True right after `in` or `;;` in a `case`: a `(` there opens a pattern.
    pattern_start: bool,
    pending: Vec<PendingHereDoc>,
}

/// Bytes that end a word.
fn is_delimiter(byte: u8) -> bool {
    matches!(
        byte,
        b' ' | b'\t' | b'\n' | b'\r' | b';' | b'&' | b'|' | b'(' | b')' | b'<' | b'>'
    )
}

impl<'a> Scan<'a> {
    fn new(bytes: &'a [u8], origin: usize, base: usize, limit: usize, bottom: Bottom) -> Self {
        Scan {
            bytes,
            origin,
            pos: 0,
            stack: Vec::new(),
            base,
            base_cases: 0,
            limit,
            deepest: base,
            bottom,
            command: true,
            pattern_start: false,
            pending: Vec::new(),
        }
    }

    fn peek(&self, ahead: usize) -> Option<u8> {
        self.bytes.get(self.pos + ahead).copied()
    }

    fn push(&mut self, frame: Frame) -> Result<(), TooDeep> {
        self.stack.push(frame);
        let depth = self.base + self.stack.len();
        self.deepest = self.deepest.max(depth);
        if depth > self.limit {
            return Err(TooDeep {
                offset: self.origin + self.pos,
                case: false,
            });
        }
        if let Frame::Case(_) = frame {
            let cases = self.base_cases
                + self
                    .stack
                    .iter()
                    .filter(|f| matches!(f, Frame::Case(_)))
                    .count();
            if cases > MAX_CASE_NESTING {
                return Err(TooDeep {
                    offset: self.origin + self.pos,
                    case: true,
                });
            }
        }
        Ok(())
    }

    fn top(&self) -> Option<Frame> {
        self.stack.last().copied()
    }

    fn in_code(&self) -> bool {
        match self.top() {
            None => self.bottom == Bottom::Code,
            Some(Frame::Double | Frame::Param) => false,
            Some(_) => true,
        }
    }

    fn in_arith(&self) -> bool {
        matches!(self.top(), Some(Frame::Paren { arith: true }))
    }

    /// True inside `[[ ]]`, parentheses within it included.
    fn in_test(&self) -> bool {
        for frame in self.stack.iter().rev() {
            match frame {
                Frame::Test => return true,
                Frame::TestOperator | Frame::Paren { arith: false } => {}
                _ => return false,
            }
        }
        false
    }

    fn run(mut self) -> Result<usize, TooDeep> {
        while let Some(byte) = self.peek(0) {
            if self.in_code() {
                self.code(byte)?;
            } else {
                self.quoted(byte)?;
            }
        }
        Ok(self.deepest)
    }

    /// `$(`, `$((`, `${` and backticks: the same inside and outside quotes.
    /// True when `byte` started one.
    fn expansion(&mut self, byte: u8) -> Result<bool, TooDeep> {
        match (byte, self.peek(1), self.peek(2)) {
            (b'$', Some(b'('), Some(b'(')) => {
                self.push(Frame::Paren { arith: true })?;
                self.push(Frame::Paren { arith: true })?;
                self.pos += 3;
            }
            (b'$', Some(b'('), _) => {
                self.push(Frame::Paren { arith: false })?;
                self.pos += 2;
                self.command = true;
            }
            (b'$', Some(b'{'), _) => {
                self.push(Frame::Param)?;
                self.pos += 2;
            }
            (b'`', _, _) => {
                if self.top() == Some(Frame::Backtick) {
                    self.stack.pop();
                } else {
                    self.push(Frame::Backtick)?;
                    self.command = true;
                }
                self.pos += 1;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Inside `"..."`, `${...}` or a here-document body.
    fn quoted(&mut self, byte: u8) -> Result<(), TooDeep> {
        if self.expansion(byte)? {
            return Ok(());
        }
        let top = self.top();
        match byte {
            b'\\' => self.pos += 2,
            b'"' if top == Some(Frame::Double) => {
                self.stack.pop();
                self.pos += 1;
            }
            b'"' => {
                // Inside `${...}` a quote opens; in a here-document it is text.
                if top == Some(Frame::Param) {
                    self.push(Frame::Double)?;
                }
                self.pos += 1;
            }
            b'\'' if top == Some(Frame::Param) => self.skip_single_quotes(),
            b'}' if top == Some(Frame::Param) => {
                self.stack.pop();
                self.pos += 1;
            }
            _ => self.pos += 1,
        }
        Ok(())
    }

    fn skip_single_quotes(&mut self) {
        self.pos += 1;
        while let Some(byte) = self.peek(0) {
            self.pos += 1;
            if byte == b'\'' {
                return;
            }
        }
    }

    /// `$'...'`, where a backslash escapes the quote.
    fn skip_ansi_c_quotes(&mut self) {
        self.pos += 2;
        while let Some(byte) = self.peek(0) {
            self.pos += if byte == b'\\' { 2 } else { 1 };
            if byte == b'\'' {
                return;
            }
        }
    }

    fn code(&mut self, byte: u8) -> Result<(), TooDeep> {
        if byte == b'$' && self.peek(1) == Some(b'\'') {
            self.skip_ansi_c_quotes();
            self.command = false;
            return Ok(());
        }
        if self.expansion(byte)? {
            return Ok(());
        }
        let pattern_start = std::mem::take(&mut self.pattern_start);
        match byte {
            b'\\' => {
                self.pos += 2;
                self.command = false;
            }
            b'\'' => {
                self.skip_single_quotes();
                self.command = false;
            }
            b'"' => {
                self.push(Frame::Double)?;
                self.pos += 1;
                self.command = false;
            }
            b'\n' => {
                self.pos += 1;
                self.command = true;
                self.pattern_start = pattern_start;
                self.here_bodies()?;
            }
            b' ' | b'\t' | b'\r' => {
                self.pos += 1;
                self.pattern_start = pattern_start;
            }
            b'#' if !self.in_arith() && self.at_word_start() => {
                while self.peek(0).is_some_and(|b| b != b'\n') {
                    self.pos += 1;
                }
            }
            b'(' => {
                let case_pattern = matches!(self.top(), Some(Frame::Case(CaseState::Pattern)));
                if !(case_pattern && pattern_start) {
                    let arith = self.in_arith() || (self.command && self.peek(1) == Some(b'('));
                    self.push(Frame::Paren { arith })?;
                }
                self.pos += 1;
                self.command = true;
            }
            b')' => {
                match self.top() {
                    Some(Frame::Paren { .. }) => {
                        self.stack.pop();
                    }
                    Some(Frame::Case(CaseState::Pattern)) => {
                        self.stack.pop();
                        self.stack.push(Frame::Case(CaseState::Body));
                    }
                    _ => {}
                }
                self.pos += 1;
                self.command = true;
            }
            b';' => {
                let double = self.peek(1) == Some(b';');
                let ends_branch = double || self.peek(1) == Some(b'&');
                if ends_branch && matches!(self.top(), Some(Frame::Case(_))) {
                    self.stack.pop();
                    self.stack.push(Frame::Case(CaseState::Pattern));
                    self.pattern_start = true;
                }
                self.pos += if double { 2 } else { 1 };
                self.command = true;
            }
            b'&' | b'|' => {
                let doubled = self.peek(1) == Some(byte);
                if doubled && self.in_test() {
                    self.push(Frame::TestOperator)?;
                }
                self.pos += if doubled { 2 } else { 1 };
                self.command = true;
            }
            b'<' if !self.in_arith()
                && self.peek(1) == Some(b'<')
                && self.peek(2) != Some(b'<') =>
            {
                self.pos += 2;
                self.here_operator();
                self.command = false;
            }
            b'<' | b'>' => {
                self.pos += 1;
                self.command = false;
            }
            _ => self.word()?,
        }
        Ok(())
    }

    fn at_word_start(&self) -> bool {
        self.pos == 0
            || self
                .bytes
                .get(self.pos - 1)
                .is_none_or(|b| is_delimiter(*b))
    }

    /// A word in code: reserved words open and close levels where the
    /// parser would read them as such.
    fn word(&mut self) -> Result<(), TooDeep> {
        let start = self.pos;
        let starts_word = self.at_word_start();
        // Up to a delimiter, or an expansion/quote the main loop must see.
        let mut end = self.pos + 1;
        while let Some(&byte) = self.bytes.get(end) {
            if is_delimiter(byte) || matches!(byte, b'$' | b'`' | b'"' | b'\'' | b'\\') {
                break;
            }
            end += 1;
        }
        self.pos = end;
        let whole = starts_word && self.bytes.get(end).is_none_or(|b| is_delimiter(*b));
        let word = &self.bytes[start..end];
        let command = std::mem::replace(&mut self.command, false);
        if !whole {
            return Ok(());
        }
        let top = self.top();
        if let Some(Frame::Case(CaseState::Head)) = top
            && word == b"in"
        {
            self.stack.pop();
            self.stack.push(Frame::Case(CaseState::Pattern));
            self.pattern_start = true;
            return Ok(());
        }
        if matches!(top, Some(Frame::Case(CaseState::Pattern))) && word == b"esac" {
            self.stack.pop();
            return Ok(());
        }
        if self.in_test() {
            match word {
                b"]]" => {
                    while let Some(frame) = self.stack.pop() {
                        if frame == Frame::Test {
                            break;
                        }
                    }
                }
                b"!" => self.push(Frame::TestOperator)?,
                _ => {}
            }
            return Ok(());
        }
        if !command || self.in_arith() {
            return Ok(());
        }
        match word {
            b"if" => self.push(Frame::If)?,
            b"while" | b"until" | b"for" | b"select" => self.push(Frame::Loop)?,
            b"case" => self.push(Frame::Case(CaseState::Head))?,
            b"{" => self.push(Frame::Brace)?,
            b"[[" => self.push(Frame::Test)?,
            b"fi" => self.close(Frame::If),
            b"done" => self.close(Frame::Loop),
            b"}" => self.close(Frame::Brace),
            b"esac" if matches!(top, Some(Frame::Case(_))) => {
                self.stack.pop();
            }
            _ => {}
        }
        // After these a command follows.
        self.command = matches!(
            word,
            b"if"
                | b"then"
                | b"else"
                | b"elif"
                | b"do"
                | b"while"
                | b"until"
                | b"{"
                | b"}"
                | b"!"
                | b"time"
                | b"fi"
                | b"done"
                | b"esac"
                | b"coproc"
        );
        Ok(())
    }

    fn close(&mut self, frame: Frame) {
        if self.top() == Some(frame) {
            self.stack.pop();
        }
    }

    /// After `<<` or `<<-`: the delimiter word, quoted or not.
    fn here_operator(&mut self) {
        let strip_tabs = self.peek(0) == Some(b'-');
        if strip_tabs {
            self.pos += 1;
        }
        while matches!(self.peek(0), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
        let mut delimiter = Vec::new();
        let mut quoted = false;
        let mut quote = None;
        while let Some(byte) = self.peek(0) {
            match (quote, byte) {
                (None, b'\'' | b'"') => {
                    quoted = true;
                    quote = Some(byte);
                }
                (Some(open), _) if byte == open => quote = None,
                (None, b'\\') => {
                    quoted = true;
                    self.pos += 1;
                    if let Some(next) = self.peek(0) {
                        delimiter.push(next);
                    }
                }
                (None, _) if is_delimiter(byte) => break,
                _ => delimiter.push(byte),
            }
            self.pos += 1;
        }
        self.pending.push(PendingHereDoc {
            delimiter,
            strip_tabs,
            expands: !quoted,
        });
    }

    /// At a newline in code: the bodies of the here-documents begun on the
    /// line just ended. A body that expands is scanned like double quotes
    /// (its substitutions are commands); a quoted one is text.
    fn here_bodies(&mut self) -> Result<(), TooDeep> {
        for here in std::mem::take(&mut self.pending) {
            let start = self.pos;
            let mut body_end = self.bytes.len();
            let mut resume = self.bytes.len();
            let mut line_start = start;
            while line_start < self.bytes.len() {
                let line_end = self.bytes[line_start..]
                    .iter()
                    .position(|b| *b == b'\n')
                    .map_or(self.bytes.len(), |at| line_start + at);
                let mut line = &self.bytes[line_start..line_end];
                if here.strip_tabs {
                    while let Some((b'\t', rest)) = line.split_first() {
                        line = rest;
                    }
                }
                if line == here.delimiter.as_slice() {
                    body_end = line_start;
                    resume = (line_end + 1).min(self.bytes.len());
                    break;
                }
                line_start = line_end + 1;
            }
            if here.expands {
                let base = self.base + self.stack.len();
                let body = &self.bytes[start..body_end];
                let mut scan = Scan::new(
                    body,
                    self.origin + start,
                    base,
                    self.limit,
                    Bottom::HereBody,
                );
                scan.base_cases = self.base_cases
                    + self
                        .stack
                        .iter()
                        .filter(|f| matches!(f, Frame::Case(_)))
                        .count();
                let deepest = scan.run()?;
                self.deepest = self.deepest.max(deepest);
            }
            self.pos = resume;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn depth(script: &str) -> usize {
        nesting_depth(script, usize::MAX).unwrap()
    }

    #[test]
    fn flat_scripts_are_shallow() {
        assert_eq!(depth(""), 0);
        assert_eq!(depth("ls -la; echo if fi done } ) esac"), 0);
        assert_eq!(depth("a | b && c || d &\ne"), 0);
        assert_eq!(depth("echo 'if ( { $(' \"x\" # ( ( ("), 1);
        assert_eq!(depth("echo {a,b} x=(1 2)"), 1);
    }

    #[test]
    fn each_construct_opens_a_level() {
        assert_eq!(depth("if a; then if b; then c; fi; fi"), 2);
        assert_eq!(depth("while a; do until b; do c; done; done"), 2);
        assert_eq!(depth("for i in 1; do select x in a; do c; done; done"), 2);
        assert_eq!(depth("case x in (a) case y in b) c;; esac;; esac"), 2);
        assert_eq!(depth("( ( a ) )"), 2);
        assert_eq!(depth("{ { a; }; }"), 2);
        assert_eq!(depth("echo $(echo $(a))"), 2);
        assert_eq!(depth("echo \"$(echo \"$(a)\")\""), 4);
        assert_eq!(depth("echo `a`"), 1);
        assert_eq!(depth("echo $(( (1) ))"), 3);
        assert_eq!(depth("echo ${a:-${b}}"), 2);
        assert_eq!(depth("[[ ( a && ! b ) ]]"), 4);
        assert_eq!(depth("diff <(a) >(b)"), 1);
    }

    #[test]
    fn levels_close_so_sequences_stay_shallow() {
        let many = "if a; then b; fi; ( c ); { d; }; while e; do f; done; echo $(g) ${h} \"i\"\n"
            .repeat(500);
        assert_eq!(depth(&many), 1);
        assert_eq!(
            depth("case x in a) b;; c) d;; esac; case y in e) f;; esac"),
            1
        );
        assert_eq!(depth("[[ a && b ]] && [[ c ]]; ( x )"), 2);
    }

    #[test]
    fn here_documents_count_their_substitutions_not_their_text() {
        assert_eq!(depth("cat <<EOF\nif ( ( {\nfi fi\nEOF\nls"), 0);
        assert_eq!(depth("cat <<EOF\n$(a $(b))\nEOF\n"), 2);
        assert_eq!(depth("cat <<'EOF'\n$(a $(b))\nEOF\n"), 0);
        assert_eq!(depth("cat <<-EOF\n\tx\n\tEOF\n( a )"), 1);
        assert_eq!(depth("echo $(( 1 << 2 ))\n( a )"), 2);
        // A `fi` inside a body closes nothing.
        assert_eq!(depth("if a; then cat <<E\nfi\nE\nif b; then c; fi; fi"), 2);
    }

    #[test]
    fn closers_in_the_wrong_place_close_nothing() {
        // `}` and `fi` as arguments; `)` ending a case pattern.
        assert_eq!(depth("{ echo }; { echo fi; }; }"), 2);
        assert_eq!(depth("( case x in a) ( b );; esac )"), 3);
    }

    #[test]
    fn the_limit_stops_the_scan_where_it_is_passed() {
        let deep = format!("{}x{}", "( ".repeat(10), " )".repeat(10));
        assert_eq!(nesting_depth(&deep, 10), Ok(10));
        let cases = format!("{}x{}", "case x in x) ".repeat(9), ";; esac".repeat(9));
        assert_eq!(nesting_depth(&cases, 100).map_err(|e| e.case), Err(true));
        assert_eq!(
            nesting_depth(&deep, 9),
            Err(TooDeep {
                offset: 18,
                case: false
            })
        );
    }
}
