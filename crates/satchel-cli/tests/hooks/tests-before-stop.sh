#!/bin/bash
# Stop: do not stop until the tests were run (once; then let go).
input=$(cat)
if [ "$(echo "$input" | jq -r '.stop_hook_active')" = "true" ]; then
  exit 0
fi
echo '{"decision": "block", "reason": "Run the test suite before you finish."}'
