#!/bin/bash
# PostToolUse: tell Claude what the formatter did.
tool=$(jq -r '.tool_name')
jq -n --arg tool "$tool" '{
  hookSpecificOutput: {
    hookEventName: "PostToolUse",
    additionalContext: ("Formatter checked the files after " + $tool + ": 0 files changed.")
  }
}'
