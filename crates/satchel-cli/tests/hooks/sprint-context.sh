#!/bin/bash
# UserPromptSubmit: plain stdout is context for Claude.
echo "Current sprint: Apollo (ends Friday). Prefer small commits."
