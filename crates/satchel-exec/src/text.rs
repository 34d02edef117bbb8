//! Turning raw terminal bytes into text a model can read: UTF-8 boundaries,
//! ANSI escape sequences, carriage-return progress lines.
//!
//! Hand-written rather than taken from `strip-ansi-escapes`, which also
//! drops tabs and carriage returns: both carry meaning in command output.

/// Length of the longest prefix of `bytes` that does not end inside a UTF-8
/// character: an incomplete trailing sequence (at most 3 bytes) is left out.
pub(crate) fn complete_prefix_len(bytes: &[u8]) -> usize {
    let len = bytes.len();
    // Walk back over at most three continuation bytes to the lead byte.
    for back in 1..=len.min(4) {
        let byte = bytes[len - back];
        if byte & 0b1100_0000 == 0b1000_0000 {
            continue;
        }
        let needed = match byte {
            0x00..=0x7f => 1,
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf7 => 4,
            // Not a lead byte: invalid anyway, lossy decoding handles it.
            _ => return len,
        };
        return if needed > back { len - back } else { len };
    }
    len
}

/// Number of bytes at the start of `bytes` that continue a character begun
/// before it (at most 3): where a cut tail should start.
pub(crate) fn continuation_prefix_len(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .take(3)
        .take_while(|byte| **byte & 0b1100_0000 == 0b1000_0000)
        .count()
}

/// Applies the configured clean-ups to decoded terminal text.
pub fn clean_terminal_text(text: &str, strip: bool, collapse: bool) -> String {
    match (strip, collapse) {
        (true, true) => collapse_carriage_returns(&strip_ansi(text)),
        (true, false) => strip_ansi(text),
        (false, true) => collapse_carriage_returns(text),
        (false, false) => text.to_owned(),
    }
}

#[derive(Clone, Copy)]
enum State {
    Ground,
    Escape,
    EscapeIntermediate,
    Csi,
    /// OSC, DCS, SOS, PM, APC: a string ended by BEL or ESC `\`.
    ControlString,
    ControlStringEscape,
}

/// Removes ANSI/ECMA-48 escape sequences (CSI, OSC, DCS and two-byte
/// escapes) and control characters other than tab, newline and carriage
/// return. An unterminated sequence at the end is dropped.
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut state = State::Ground;
    for ch in text.chars() {
        state = match state {
            State::Ground => ground(ch, &mut out),
            State::Escape => match ch {
                '[' => State::Csi,
                ']' | 'P' | 'X' | '^' | '_' => State::ControlString,
                '\u{20}'..='\u{2f}' => State::EscapeIntermediate,
                '\u{1b}' => State::Escape,
                _ => State::Ground,
            },
            State::EscapeIntermediate => match ch {
                '\u{20}'..='\u{2f}' => State::EscapeIntermediate,
                _ => State::Ground,
            },
            State::Csi => match ch {
                '\u{20}'..='\u{3f}' => State::Csi,
                '\u{40}'..='\u{7e}' => State::Ground,
                '\u{1b}' => State::Escape,
                // Malformed: abandon the sequence, keep the character.
                _ => ground(ch, &mut out),
            },
            State::ControlString => match ch {
                '\u{07}' => State::Ground,
                '\u{1b}' => State::ControlStringEscape,
                _ => State::ControlString,
            },
            State::ControlStringEscape => match ch {
                '\\' => State::Ground,
                '\u{1b}' => State::ControlStringEscape,
                _ => State::ControlString,
            },
        };
    }
    out
}

fn ground(ch: char, out: &mut String) -> State {
    match ch {
        '\u{1b}' => State::Escape,
        '\t' | '\n' | '\r' => {
            out.push(ch);
            State::Ground
        }
        c if c.is_control() => State::Ground,
        c => {
            out.push(c);
            State::Ground
        }
    }
}

/// Keeps, of each line, only what follows its last carriage return, as a
/// terminal would show it after a progress bar finished. `\r\n` line endings
/// count as plain newlines.
pub fn collapse_carriage_returns(text: &str) -> String {
    if !text.contains('\r') {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    for (index, line) in text.split('\n').enumerate() {
        if index > 0 {
            out.push('\n');
        }
        let line = line.strip_suffix('\r').unwrap_or(line);
        out.push_str(line.rsplit('\r').next().unwrap_or(line));
    }
    out
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn complete_prefix_drops_only_an_unfinished_character() {
        let euro = "€".as_bytes(); // e2 82 ac
        assert_eq!(complete_prefix_len(b""), 0);
        assert_eq!(complete_prefix_len(b"abc"), 3);
        assert_eq!(complete_prefix_len(euro), 3);
        assert_eq!(complete_prefix_len(&euro[..1]), 0);
        assert_eq!(complete_prefix_len(&euro[..2]), 0);
        let mut bytes = b"ab".to_vec();
        bytes.extend_from_slice(&"😀".as_bytes()[..3]);
        assert_eq!(complete_prefix_len(&bytes), 2);
        // Invalid bytes are not our business here: lossy decoding replaces them.
        assert_eq!(complete_prefix_len(&[b'a', 0xff]), 2);
        assert_eq!(complete_prefix_len(&[0x80, 0x80, 0x80, 0x80]), 4);
    }

    #[test]
    fn continuation_prefix_skips_the_rest_of_a_cut_character() {
        let euro = "€".as_bytes();
        assert_eq!(continuation_prefix_len(&euro[1..]), 2);
        assert_eq!(continuation_prefix_len(euro), 0);
        assert_eq!(continuation_prefix_len(b"abc"), 0);
        assert_eq!(continuation_prefix_len(&[0x80; 8]), 3);
    }

    #[test]
    fn strip_ansi_removes_sequences_and_keeps_layout() {
        assert_eq!(
            strip_ansi("\x1b[1;31mred\x1b[0m\tplain\r\n"),
            "red\tplain\r\n"
        );
        assert_eq!(strip_ansi("\x1b]0;title\x07after"), "after");
        assert_eq!(
            strip_ansi("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"),
            "link"
        );
        assert_eq!(strip_ansi("a\x1b(Bb\x1b=c"), "abc");
        assert_eq!(strip_ansi("bell\x07 back\x08space"), "bell backspace");
        assert_eq!(strip_ansi("cut at end \x1b[3"), "cut at end ");
        assert_eq!(strip_ansi("ünïcödé ✓"), "ünïcödé ✓");
    }

    #[test]
    fn carriage_returns_collapse_to_the_last_state() {
        assert_eq!(
            collapse_carriage_returns("10%\r50%\r100%\ndone\n"),
            "100%\ndone\n"
        );
        assert_eq!(collapse_carriage_returns("a\r\nb\r\n"), "a\nb\n");
        assert_eq!(collapse_carriage_returns("working 3/9\r"), "working 3/9");
        assert_eq!(collapse_carriage_returns("no returns"), "no returns");
    }
}
