//! Telling a model caught in a loop (writing the same call or sentence
//! again and again until its output limit, as small local models do) from
//! a long reply: [`repeats_itself`] judges a reply that was cut off,
//! [`looping_early`] a reply still streaming, so it can be stopped within
//! seconds instead of at the limit.

/// Shortest repeated unit looked for, in bytes.
const MIN_PERIOD: usize = 16;
/// The end of a reply looked at, in bytes.
const WINDOW: usize = 16 * 1024;
/// A streaming reply is judged from this length on, in bytes.
const EARLY_FROM: usize = 1024;

/// Whether `text` ends in one unit written again and again: at least
/// three times, over at least half of the text looked at.
pub(super) fn repeats_itself(text: &str) -> bool {
    repeated_end(text, 3, 0.5)
}

/// Whether a reply still streaming is a loop for certain: at least
/// [`EARLY_FROM`] bytes, one unit six times over three quarters of them.
pub(super) fn looping_early(text: &str) -> bool {
    text.len() >= EARLY_FROM && repeated_end(text, 6, 0.75)
}

/// Whether the end of `text` is one unit (of [`MIN_PERIOD`] bytes or more)
/// at least `times` times over, covering at least `share` of the text
/// looked at.
fn repeated_end(text: &str, times: usize, share: f64) -> bool {
    let bytes = text.as_bytes();
    let bytes = &bytes[bytes.len().saturating_sub(WINDOW)..];
    let n = bytes.len();
    (MIN_PERIOD..=n / times.max(1)).any(|period| {
        // How far back from the end every byte equals the one a period on.
        let run = (0..n - period)
            .rev()
            .take_while(|&i| bytes[i] == bytes[i + period])
            .count();
        let span = run + period;
        span >= times * period && span as f64 >= share * n as f64
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn looping_reply(calls: usize) -> String {
        let call = "{\n    \"tool\": \"fetch\",\n    \"params\": {\n      \"url\": \"https://example.com/api/fetch\",\n      \"max_length\": 200\n    }\n  },\n  ";
        format!("{{\n  \"tool_calls\": [{}", call.repeat(calls))
    }

    #[test]
    fn a_loop_is_told_from_a_long_reply_that_was_cut() {
        let looping = looping_reply(40);
        assert!(repeats_itself(&looping));
        // Cut mid-unit, as the output limit cuts.
        assert!(repeats_itself(&looping[..looping.len() - 37]));
        let prose: String = (0..300)
            .map(|n| format!("line {n} of a long file\n"))
            .collect();
        assert!(!repeats_itself(&prose));
        // A rule of dashes at the end of a long text is not a loop.
        assert!(!repeats_itself(&format!("{prose}{}", "-".repeat(80))));
        assert!(!repeats_itself(""));
        assert!(!repeats_itself("short"));
    }

    #[test]
    fn a_streaming_loop_is_caught_after_about_a_kilobyte_and_a_list_is_not() {
        assert!(!looping_early(&looping_reply(5)), "too short to judge");
        assert!(looping_early(&looping_reply(12)));
        // A reply that repeats a line a few times among others goes on.
        let list: String = (0..80)
            .map(|n| {
                if n % 3 == 0 {
                    "- the same item\n".to_owned()
                } else {
                    format!("- item {n}\n")
                }
            })
            .collect();
        assert!(!looping_early(&list));
        // The same short line, many times, after a real start, is a loop.
        let stuck = format!(
            "Here is the answer you asked for, in full.\n{}",
            "Hello! ".repeat(200)
        );
        assert!(looping_early(&stuck));
    }
}
