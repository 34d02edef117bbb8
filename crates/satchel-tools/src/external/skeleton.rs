//! Skeletons for new external tools: a working tool to edit, in bash or
//! Python, that already speaks the protocol.

use std::fmt;

/// Languages `satchel tools new` can write a skeleton in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    /// Bash, with `jq` for JSON.
    Bash,
    /// Python 3, standard library only.
    Python,
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Language::Bash => "bash",
            Language::Python => "python",
        })
    }
}

/// The source of a new tool named `name` (a valid tool name) that echoes
/// a `text` input with its length.
pub fn skeleton(name: &str, language: Language) -> String {
    let template = match language {
        Language::Bash => BASH,
        Language::Python => PYTHON,
    };
    template.replace("{{NAME}}", name)
}

const BASH: &str = r#"#!/usr/bin/env bash
# Satchel external tool `{{NAME}}`.
# `{{NAME}} --schema` prints the spec; a call gets its input as JSON on stdin
# and prints its results as one JSON value on stdout. Report a failure as
# {"error": "...", "error_code": "INVALID_PARAMS"} (exit 0), so the model
# gets a message it can act on. Needs jq.
set -euo pipefail

if [[ "${1:-}" == "--schema" ]]; then
    cat <<'JSON'
{
  "name": "{{NAME}}",
  "description": "Describe what {{NAME}} does and when the model should use it.",
  "inputSchema": {
    "type": "object",
    "properties": {
      "text": {"type": "string", "description": "The text to work on"}
    },
    "required": ["text"],
    "additionalProperties": false
  },
  "annotations": {"readOnlyHint": true}
}
JSON
    exit 0
fi

input=$(cat)
text=$(jq -r '.text' <<<"$input")
if [[ -z "$text" ]]; then
    jq -n '{error: "text is empty; give some text", error_code: "INVALID_PARAMS"}'
    exit 0
fi
jq -n --arg text "$text" '{text: $text, length: ($text | length)}'
"#;

const PYTHON: &str = r#"#!/usr/bin/env python3
"""Satchel external tool `{{NAME}}`.

`{{NAME}} --schema` prints the spec; a call gets its input as JSON on stdin
and prints its results as one JSON value on stdout. Report a failure as
{"error": "...", "error_code": "INVALID_PARAMS"} (exit 0), so the model
gets a message it can act on.
"""
import json
import sys

SCHEMA = {
    "name": "{{NAME}}",
    "description": "Describe what {{NAME}} does and when the model should use it.",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "The text to work on"}},
        "required": ["text"],
        "additionalProperties": False,
    },
    "annotations": {"readOnlyHint": True},
}


def run(params):
    text = params["text"]
    if not text:
        return {"error": "text is empty; give some text", "error_code": "INVALID_PARAMS"}
    return {"text": text, "length": len(text)}


if __name__ == "__main__":
    if sys.argv[1:] == ["--schema"]:
        print(json.dumps(SCHEMA))
    else:
        print(json.dumps(run(json.load(sys.stdin))))
"#;
