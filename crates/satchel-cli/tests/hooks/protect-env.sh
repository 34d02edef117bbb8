#!/bin/bash
# PreToolUse (Bash): never let the agent read .env files.
command=$(jq -r '.tool_input.command // ""')
if [[ "$command" == *".env"* ]]; then
  jq -n '{
    hookSpecificOutput: {
      hookEventName: "PreToolUse",
      permissionDecision: "deny",
      permissionDecisionReason: "Reading .env files is not allowed: they hold secrets."
    }
  }'
fi
exit 0
