//! A server-sent events parser over raw byte chunks, as the WHATWG HTML
//! standard defines the format: lines end in LF, CRLF or CR; `:` starts a
//! comment; `data` lines accumulate; a blank line dispatches the event.
//!
//! Chunks may split anywhere, even inside a UTF-8 character or a CRLF.
//! `id` and `retry` fields are ignored: Satchel never reconnects a stream.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event` field, `message` when absent.
    pub(crate) event: String,
    /// The `data` lines joined with LF.
    pub(crate) data: String,
}

/// Incremental parser state.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    buf: Vec<u8>,
    event: String,
    data: String,
    has_data: bool,
    started: bool,
}

impl SseParser {
    /// Feeds a chunk; complete events are appended to `out`. Fails on a
    /// line that is not UTF-8.
    pub(crate) fn push(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), String> {
        const BOM: &[u8] = &[0xEF, 0xBB, 0xBF];
        self.buf.extend_from_slice(chunk);
        if !self.started {
            if self.buf.len() < BOM.len() && BOM.starts_with(&self.buf) {
                return Ok(());
            }
            self.started = true;
            if self.buf.starts_with(BOM) {
                self.buf.drain(..BOM.len());
            }
        }
        let mut start = 0;
        let mut i = 0;
        while i < self.buf.len() {
            let b = self.buf[i];
            if b != b'\n' && b != b'\r' {
                i += 1;
                continue;
            }
            // A CR at the end of the buffer may be the first half of CRLF.
            if b == b'\r' && i + 1 == self.buf.len() {
                break;
            }
            let line_end = i;
            i += if b == b'\r' && self.buf[i + 1] == b'\n' {
                2
            } else {
                1
            };
            let line = std::str::from_utf8(&self.buf[start..line_end])
                .map_err(|error| format!("a stream line is not UTF-8 ({error})"))?
                .to_owned();
            start = i;
            self.line(&line, out);
        }
        self.buf.drain(..start);
        Ok(())
    }

    fn line(&mut self, line: &str, out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            if self.has_data {
                if self.data.ends_with('\n') {
                    self.data.pop();
                }
                let event = if self.event.is_empty() {
                    "message".to_owned()
                } else {
                    std::mem::take(&mut self.event)
                };
                out.push(SseEvent {
                    event,
                    data: std::mem::take(&mut self.data),
                });
            }
            self.event.clear();
            self.data.clear();
            self.has_data = false;
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = value.to_owned(),
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn parse_in_pieces(input: &[u8], piece: usize) -> Vec<SseEvent> {
        let mut parser = SseParser::default();
        let mut out = Vec::new();
        for chunk in input.chunks(piece) {
            parser.push(chunk, &mut out).unwrap();
        }
        out
    }

    #[test]
    fn events_survive_any_chunking_and_any_line_ending() {
        let input = "\u{feff}: comment\r\nevent: message_start\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n\
                     data: é ünïcode\n\nevent: ping\rdata:\r\rdata: [DONE]\n\n";
        let expected = vec![
            SseEvent {
                event: "message_start".into(),
                data: "{\"a\":\n1}".into(),
            },
            SseEvent {
                event: "message".into(),
                data: "é ünïcode".into(),
            },
            SseEvent {
                event: "ping".into(),
                data: String::new(),
            },
            SseEvent {
                event: "message".into(),
                data: "[DONE]".into(),
            },
        ];
        for piece in 1..input.len() {
            assert_eq!(
                parse_in_pieces(input.as_bytes(), piece),
                expected,
                "pieces of {piece}"
            );
        }
    }

    #[test]
    fn an_unterminated_event_is_not_dispatched() {
        assert_eq!(parse_in_pieces(b"data: partial\n", 4), vec![]);
    }
}
