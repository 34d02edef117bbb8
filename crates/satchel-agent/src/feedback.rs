//! The tool feedback block that precedes each turn's tool results:
//!
//! ```text
//! Tool results feedback:
//! Turn 3/25
//! Conversation Goal: ...
//! Current Objective: ...
//! Tools Used: bash(4: 3✓ 1✗), memory(1: 1✓ 0✗)
//! Resources: 2 files read, 1 modified, 1 URL
//! ```

use std::fmt::Write;

use satchel_tools::usage::{Resources, ToolTally};

/// Everything the block shows.
#[derive(Debug, Clone, Copy)]
pub struct Feedback<'a> {
    /// The turn whose results follow (1-based).
    pub turn: u32,
    /// The statement's turn budget.
    pub max_turns: u32,
    /// The conversation goal, when known.
    pub goal: Option<&'a str>,
    /// The statement's objective, when known.
    pub objective: Option<&'a str>,
    /// Tool use in the conversation so far, this turn included.
    pub tally: &'a ToolTally,
    /// Resources touched in the conversation so far.
    pub resources: &'a Resources,
}

impl Feedback<'_> {
    /// The block's text, ending with a blank line.
    pub fn render(&self) -> String {
        let mut block = String::from("Tool results feedback:\n");
        let _ = writeln!(block, "Turn {}/{}", self.turn, self.max_turns);
        let _ = writeln!(
            block,
            "Conversation Goal: {}",
            self.goal.unwrap_or("(not set)")
        );
        let _ = writeln!(
            block,
            "Current Objective: {}",
            self.objective.unwrap_or("(not set)")
        );
        let _ = writeln!(block, "Tools Used: {}", self.tally.describe());
        let _ = writeln!(block, "Resources: {}", self.resources.describe());
        if self.turn + 1 == self.max_turns {
            block.push_str(
                "Turn budget: the next turn is the last one; tools will be disabled, so answer \
                 with what you have.\n",
            );
        }
        block.push('\n');
        block
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_reads_as_designed() {
        let mut tally = ToolTally::default();
        for failed in [false, true, false, false] {
            tally.add("bash", failed);
        }
        tally.add("memory", false);
        let mut resources = Resources::default();
        resources.read.extend(["a".to_owned(), "b".to_owned()]);
        resources.modified.insert("c".into());
        resources.fetched.insert("https://x".into());
        let block = Feedback {
            turn: 3,
            max_turns: 25,
            goal: Some("ship it"),
            objective: None,
            tally: &tally,
            resources: &resources,
        }
        .render();
        assert_eq!(
            block,
            "Tool results feedback:\nTurn 3/25\nConversation Goal: ship it\n\
             Current Objective: (not set)\nTools Used: bash(4: 3✓ 1✗), memory(1: 1✓ 0✗)\n\
             Resources: 2 files read, 1 modified, 1 URL\n\n"
        );
    }
}
