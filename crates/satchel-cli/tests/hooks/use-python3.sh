#!/bin/bash
# PreToolUse (Bash): this machine has no `python`, only `python3`.
input=$(cat)
command=$(echo "$input" | jq -r '.tool_input.command // ""')
if [[ "$command" == python\ * ]]; then
  echo "$input" | jq '{
    hookSpecificOutput: {
      hookEventName: "PreToolUse",
      permissionDecision: "allow",
      permissionDecisionReason: "python is python3 here",
      updatedInput: (.tool_input | .command |= sub("^python "; "python3 "))
    }
  }'
fi
exit 0
