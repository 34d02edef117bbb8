#!/usr/bin/env bash
# How fast the MCP client gets over a server that dies (issue #42): from
# a streamable-HTTP server's death to the in-flight call's error
# (server-everything on 2025-11-25, the Python SDK on 2026-07-28), and
# from a stdio server's crash to its tools being callable again, against
# that server's own cold start measured in the same run; p50 and max over
# 10 runs each. Targets: the call's error within 5 s, callable again
# within 3 s. Results: bench/mcp-faults-results.md.
#
# Usage: bench/mcp-faults.sh [cargo bench options, e.g. --profile dev]
# Needs the test peers: scripts/install-test-peers.sh.
# Everything runs in temporary directories: nothing of the user's is read.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
unset RUST_LOG
exec cargo bench --manifest-path "$root/Cargo.toml" -p satchel-mcp --bench faults "$@"
