//! A tool's text result cut to what the model gets: head and tail within
//! `exec.resultLimitBytes`, the whole kept in a spill file like a
//! command's output, so that no tool floods the model's context or the
//! record with one answer.

use crate::capture::Capture;
use crate::{Captured, RunnerConfig};

/// `text` cut to `config.result.limit_bytes` (head and tail, a marker
/// between), the whole spilled; `None` when it fits or the limit is 0
/// (off), so a result that fits costs one length check.
pub fn cap_result(text: &str, config: &RunnerConfig) -> Option<Captured> {
    let limit = config.result.limit_bytes;
    if limit == 0 || text.len() <= limit {
        return None;
    }
    let mut capture = Capture::new(limit, "result", config.spill.clone(), &config.redactor);
    capture.push(text.as_bytes());
    Some(capture.finish(false, false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{OutputConfig, SpillConfig};

    fn config(limit: usize, spill: &std::path::Path) -> RunnerConfig {
        RunnerConfig {
            result: OutputConfig { limit_bytes: limit },
            spill: SpillConfig {
                dir: Some(spill.to_path_buf()),
                ..SpillConfig::default()
            },
            ..RunnerConfig::default()
        }
    }

    #[test]
    fn a_result_that_fits_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(cap_result("short", &config(100, dir.path())), None);
        assert_eq!(cap_result(&"x".repeat(500), &config(0, dir.path())), None);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_long_result_keeps_head_and_tail_and_spills_the_whole() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (0..1000).map(|n| format!("line {n}\n")).collect();
        let captured = cap_result(&text, &config(100, dir.path())).unwrap();
        assert!(captured.text.starts_with("line 0\n"), "{}", captured.text);
        assert!(captured.text.ends_with("line 999\n"), "{}", captured.text);
        assert!(captured.text.contains("bytes omitted"));
        assert_eq!(captured.total_bytes, text.len() as u64);
        let spill = captured.spill.as_ref().unwrap();
        assert!(spill.complete);
        assert_eq!(std::fs::read_to_string(&spill.path).unwrap(), text);
        let note = captured.cut_note("result", "`read`").unwrap();
        assert!(note.contains(&spill.path.display().to_string()), "{note}");
    }
}
