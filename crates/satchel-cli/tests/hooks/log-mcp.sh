#!/bin/bash
# PreToolUse (mcp__everything__.*): log MCP calls.
jq -r '.tool_name' >> "$CLAUDE_PROJECT_DIR/.claude/mcp.log"
