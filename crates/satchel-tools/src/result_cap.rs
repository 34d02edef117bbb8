//! Every tool's text result held to `exec.resultLimitBytes` before the
//! model, the record or an MCP client gets it, the whole kept in a spill
//! file: a `grep` with a huge `head_limit`, a `fetch` of a long page or a
//! remote MCP server's 11 MB answer cannot flood the context or the
//! database. JSON results are structured and left whole (bash cuts its
//! own streams inside them).

use satchel_core::{Content, ToolOutput, ToolResults};
use satchel_exec::RunnerConfig;

/// Where the model is told to look for the rest.
const READERS: &str = "`read` (`offset` and `limit`) or `grep`";

/// `output` with each text over the limit cut to head and tail, and a
/// note for the model saying what was cut and where the whole is.
pub(crate) fn cap_results(mut output: ToolOutput, config: &RunnerConfig) -> ToolOutput {
    let mut notes = Vec::new();
    match &mut output.results {
        ToolResults::Text(text) => cap_text(text, config, &mut notes),
        ToolResults::Parts(parts) => {
            for part in parts {
                if let Content::Text { text } = part {
                    cap_text(text, config, &mut notes);
                }
            }
        }
    }
    if !notes.is_empty() {
        let note = notes.join(" ");
        output.response = Some(match output.response.take() {
            Some(response) => format!("{response} {note}"),
            None => note,
        });
    }
    output
}

fn cap_text(text: &mut String, config: &RunnerConfig, notes: &mut Vec<String>) {
    if let Some(captured) = satchel_exec::cap_result(text, config) {
        if let Some(note) = captured.cut_note("result", READERS) {
            notes.push(format!("The tool's {note}"));
        }
        *text = captured.text;
    }
}

#[cfg(test)]
mod tests {
    use satchel_exec::{OutputConfig, SpillConfig};

    use super::*;

    #[test]
    fn a_long_text_is_cut_and_the_note_names_the_spill_file() {
        let dir = tempfile::tempdir().unwrap();
        let config = RunnerConfig {
            result: OutputConfig { limit_bytes: 64 },
            spill: SpillConfig {
                dir: Some(dir.path().to_path_buf()),
                ..SpillConfig::default()
            },
            ..RunnerConfig::default()
        };
        let long = "0123456789\n".repeat(100);
        let output = ToolOutput::success(ToolResults::Text(long.clone()), "found")
            .with_response("a note of the tool's own");
        let capped = cap_results(output, &config);
        let ToolResults::Text(text) = &capped.results else {
            panic!("text expected");
        };
        assert!(text.len() < 200, "{text}");
        let response = capped.response.unwrap();
        assert!(
            response.starts_with("a note of the tool's own The tool's result was 1100 bytes"),
            "{response}"
        );
        let spilled = std::fs::read_dir(dir.path())
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        assert!(
            response.contains(&spilled.display().to_string()),
            "{response}"
        );
        assert_eq!(std::fs::read_to_string(spilled).unwrap(), long);

        let short = ToolOutput::success(ToolResults::Text("short".into()), "found");
        assert_eq!(cap_results(short.clone(), &config), short);
    }
}
