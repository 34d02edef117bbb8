#!/bin/bash
# PreToolUse (Bash): keep a log of commands; says nothing.
jq -r '.tool_input.command' >> "$CLAUDE_PROJECT_DIR/.claude/commands.log"
exit 0
