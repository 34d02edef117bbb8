//! What a request's tokens are attributed to: [`Section`], the counts per
//! section ([`SectionTokens`]), and the section marks of a body (`Spans`)
//! that the body writer makes and the counter and its cache read.

use serde::{Deserialize, Serialize};

/// A part of a request that tokens are attributed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Section {
    /// The system prompt.
    System,
    /// Tool definitions (names, descriptions, input schemas).
    Tools,
    /// User and assistant messages, with their tool calls.
    Messages,
    /// Tool results returned to the model.
    ToolResults,
    /// Everything else: the model name, parameters, JSON punctuation
    /// between the sections.
    Framing,
}

impl Section {
    /// Every section, in the order a breakdown shows them.
    pub const ALL: [Section; 5] = [
        Section::System,
        Section::Tools,
        Section::Messages,
        Section::ToolResults,
        Section::Framing,
    ];

    /// A short label, e.g. `tool definitions`.
    pub fn label(self) -> &'static str {
        match self {
            Section::System => "system prompt",
            Section::Tools => "tool definitions",
            Section::Messages => "messages",
            Section::ToolResults => "tool results",
            Section::Framing => "request framing",
        }
    }
}

/// Tokens per [`Section`] of a request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SectionTokens {
    /// See [`Section::System`].
    pub system: u64,
    /// See [`Section::Tools`].
    pub tools: u64,
    /// See [`Section::Messages`].
    pub messages: u64,
    /// See [`Section::ToolResults`].
    pub tool_results: u64,
    /// See [`Section::Framing`].
    pub framing: u64,
}

impl SectionTokens {
    /// Tokens attributed to `section`.
    pub fn get(&self, section: Section) -> u64 {
        match section {
            Section::System => self.system,
            Section::Tools => self.tools,
            Section::Messages => self.messages,
            Section::ToolResults => self.tool_results,
            Section::Framing => self.framing,
        }
    }

    /// The count of `section`, to add to.
    pub(crate) fn slot(&mut self, section: Section) -> &mut u64 {
        match section {
            Section::System => &mut self.system,
            Section::Tools => &mut self.tools,
            Section::Messages => &mut self.messages,
            Section::ToolResults => &mut self.tool_results,
            Section::Framing => &mut self.framing,
        }
    }

    /// The sum of every section.
    pub(crate) fn sum(&self) -> u64 {
        self.system + self.tools + self.messages + self.tool_results + self.framing
    }
}

/// Where each section's bytes start in a body, in order. Produced by the
/// body writer; `Image` spans are skipped by the counter.
#[derive(Debug, Clone, Default)]
pub(crate) struct Spans {
    /// `(start offset, span)`, sorted by offset; a span runs to the next start.
    pub(crate) starts: Vec<(usize, Span)>,
}

/// What a stretch of body bytes is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Span {
    /// Text counted for a section.
    Text(Section),
    /// Base64 image data inside a section.
    Image(Section),
    /// A declaration the API expands into a fixed number of tokens of its
    /// own (a server-defined tool such as Anthropic's text editor): those
    /// tokens are counted instead of the bytes.
    Declared(Section, u64),
}

impl Spans {
    /// Marks that bytes from `offset` on belong to `span`.
    pub(crate) fn mark(&mut self, offset: usize, span: Span) {
        match self.starts.last_mut() {
            Some((last, _)) if *last == offset => {
                // Nothing was written under the previous mark.
                self.starts.pop();
            }
            _ => {}
        }
        if self.starts.last().map(|(_, s)| *s) != Some(span) {
            self.starts.push((offset, span));
        }
    }
}

impl Spans {
    /// The offset up to which `self` and `other` mark the same sections:
    /// every mark before it is the same in both.
    pub(crate) fn shared_prefix_end(&self, other: &Spans) -> usize {
        let same = self
            .starts
            .iter()
            .zip(&other.starts)
            .take_while(|(a, b)| a == b)
            .count();
        let next = |starts: &[(usize, Span)]| starts.get(same).map_or(usize::MAX, |(at, _)| *at);
        next(&self.starts).min(next(&other.starts))
    }
}
