#!/bin/bash
# PreToolUse (Bash): refuse recursive forced removal.
command=$(jq -r '.tool_input.command // empty')
if echo "$command" | grep -Eq 'rm[[:space:]]+-(rf|fr)'; then
  echo "Blocked: 'rm -rf' is not allowed in this repository. Delete files one by one." >&2
  exit 2
fi
exit 0
