#!/usr/bin/env bash
# Installs the MCP peers the test suite runs against, into `.peers/` at the
# root of the repository (gitignored), at pinned versions:
#   .peers/venv/            the official MCP Python SDK (`mcp` on PyPI) and
#                           `opentelemetry-proto` (decodes OTLP for the
#                           tests' trace receiver, as a collector would)
#   .peers/node_modules/    @modelcontextprotocol/server-everything (the
#                           reference server), @modelcontextprotocol/conformance
#                           (the conformance suite) and bun (which runs the
#                           suite: it needs Node 22+, and this machine may
#                           have an older Node), telegram-test-api (a
#                           Telegram Bot API emulator, for the bot's tests)
#                           and playwright-core (drives Debian's chromium
#                           in the web view's browser tests)
# Re-running is cheap: a peer already at its pinned version is left alone.
# Tests look for the peers at these paths and fail, naming this script, when
# they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/venv.sh
. scripts/lib/venv.sh

MCP_PY_VERSION="2.3.0"
OTEL_PROTO_VERSION="1.45.2"
SERVER_EVERYTHING_VERSION="2026.8.31"
CONFORMANCE_VERSION="0.2.0-alpha.12"
BUN_VERSION="1.4.5"
TELEGRAM_TEST_API_VERSION="4.2.1"
PLAYWRIGHT_VERSION="1.65.1"
# Claude Code, a real MCP client of `satchel mcp serve` (a 245 MB native
# binary: its own prefix, so the other peers' installs never touch it).
CLAUDE_CODE_VERSION="2.1.332"

peers="$PWD/.peers"
mkdir -p "$peers"

# Python: a project-local virtual environment.
if ! "$peers/venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '$MCP_PY_VERSION')" 2>/dev/null; then
    echo "installing mcp==$MCP_PY_VERSION into .peers/venv"
    make_venv "$peers/venv"
    "$peers/venv/bin/python" -m pip install --quiet --disable-pip-version-check "mcp==$MCP_PY_VERSION"
fi
if ! "$peers/venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('opentelemetry-proto') != '$OTEL_PROTO_VERSION')" 2>/dev/null; then
    echo "installing opentelemetry-proto==$OTEL_PROTO_VERSION into .peers/venv"
    "$peers/venv/bin/python" -m pip install --quiet --disable-pip-version-check "opentelemetry-proto==$OTEL_PROTO_VERSION"
fi

# Node: a project-local package.json pinning exact versions.
cat > "$peers/package.json" <<JSON
{
  "name": "satchel-test-peers",
  "private": true,
  "description": "MCP peers for Satchel's tests; installed by scripts/install-test-peers.sh",
  "dependencies": {
    "@modelcontextprotocol/server-everything": "$SERVER_EVERYTHING_VERSION",
    "@modelcontextprotocol/conformance": "$CONFORMANCE_VERSION",
    "bun": "$BUN_VERSION",
    "telegram-test-api": "$TELEGRAM_TEST_API_VERSION",
    "playwright-core": "$PLAYWRIGHT_VERSION"
  }
}
JSON
installed() {
    node -e "process.exit(require('$peers/node_modules/$1/package.json').version === '$2' ? 0 : 1)" 2>/dev/null
}
if ! installed @modelcontextprotocol/server-everything "$SERVER_EVERYTHING_VERSION" \
    || ! installed @modelcontextprotocol/conformance "$CONFORMANCE_VERSION" \
    || ! installed bun "$BUN_VERSION" \
    || ! installed telegram-test-api "$TELEGRAM_TEST_API_VERSION" \
    || ! installed playwright-core "$PLAYWRIGHT_VERSION" \
    || ! [ -x "$peers/node_modules/.bin/bun" ]; then
    echo "installing npm peers into .peers/node_modules"
    (cd "$peers" && npm install --no-audit --no-fund --loglevel=error)
fi

if ! node -e "process.exit(require('$peers/claude-code/node_modules/@anthropic-ai/claude-code/package.json').version === '$CLAUDE_CODE_VERSION' ? 0 : 1)" 2>/dev/null; then
    echo "installing Claude Code $CLAUDE_CODE_VERSION into .peers/claude-code"
    mkdir -p "$peers/claude-code"
    npm install --prefix "$peers/claude-code" --no-audit --no-fund --loglevel=error \
        "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION"
fi

echo "test peers ready in .peers/"
