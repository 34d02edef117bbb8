#!/bin/bash
# PreToolUse (Bash): a person confirms every git push.
command=$(jq -r '.tool_input.command // ""')
if [[ "$command" == git\ push* ]]; then
  jq -n '{
    hookSpecificOutput: {
      hookEventName: "PreToolUse",
      permissionDecision: "ask",
      permissionDecisionReason: "Pushing changes leaves this machine."
    }
  }'
fi
exit 0
