#!/usr/bin/env bash
# Captures the tool input schemas of real MCP servers into
# crates/satchel-core/tests/data/mcp-tool-schemas.json: the corpus the
# schema translation (satchel_core::portable) is tested on. Not run by the
# tests (they read the committed file); run it again to refresh the corpus
# when the servers change. Installs the servers into a temporary directory
# (npm and PyPI) and lists their tools with the official MCP Python SDK
# from .peers/venv (scripts/install-test-peers.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

python="$PWD/.peers/venv/bin/python"
[ -x "$python" ] || { echo "run scripts/install-test-peers.sh first" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

PUPPETEER_SKIP_DOWNLOAD=1 npm install --silent --ignore-scripts --prefix "$work/npm" \
    @modelcontextprotocol/server-filesystem @modelcontextprotocol/server-memory \
    @modelcontextprotocol/server-sequential-thinking @modelcontextprotocol/server-everything \
    @wonderwhy-er/desktop-commander >/dev/null
python3 -m venv "$work/py"
"$work/py/bin/pip" install --quiet --disable-pip-version-check mcp-server-git mcp-server-time mcp-server-fetch

versions=$(node -e '
const p = process.argv[1];
const names = ["server-filesystem", "server-memory", "server-sequential-thinking", "server-everything"];
const out = {};
for (const n of names) out[n] = require(`${p}/node_modules/@modelcontextprotocol/${n}/package.json`).version;
out["desktop-commander"] = require(`${p}/node_modules/@wonderwhy-er/desktop-commander/package.json`).version;
console.log(JSON.stringify(out));' "$work/npm")

mkdir -p "$work/home" "$work/repo"
git -C "$work/repo" init -q
node_bin="$work/npm/node_modules/.bin"
servers=$(cat <<JSON
{
 "server-filesystem": ["node", ["$node_bin/mcp-server-filesystem", "$work/home"]],
 "server-memory": ["node", ["$node_bin/mcp-server-memory"]],
 "server-sequential-thinking": ["node", ["$node_bin/mcp-server-sequential-thinking"]],
 "server-everything": ["node", ["$node_bin/mcp-server-everything"]],
 "desktop-commander": ["node", ["$work/npm/node_modules/@wonderwhy-er/desktop-commander/dist/index.js"]],
 "mcp-server-git": ["$work/py/bin/mcp-server-git", ["--repository", "$work/repo"]],
 "mcp-server-time": ["$work/py/bin/mcp-server-time", []],
 "mcp-server-fetch": ["$work/py/bin/mcp-server-fetch", []]
}
JSON
)
HOME="$work/home" "$python" - "$servers" "$versions" > crates/satchel-core/tests/data/mcp-tool-schemas.json <<'PY'
import asyncio, json, os, sys
from mcp import ClientSession, StdioServerParameters, stdio_client

servers, versions = json.loads(sys.argv[1]), json.loads(sys.argv[2])

async def tools_of(command, args):
    env = {"PATH": os.environ["PATH"], "HOME": os.environ["HOME"]}
    params = StdioServerParameters(command=command, args=args, env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await asyncio.wait_for(session.initialize(), 60)
            listed = await asyncio.wait_for(session.list_tools(), 60)
            return [{"name": t.name, "inputSchema": t.model_dump(by_alias=True, mode="json")["inputSchema"]}
                    for t in listed.tools]

async def main():
    out = {}
    for name, (command, args) in servers.items():
        out[name] = await tools_of(command, args)
        print(f"{name}: {len(out[name])} tools", file=sys.stderr)
    print(json.dumps({"note": "captured by scripts/capture-schema-corpus.sh", "versions": versions,
                      "servers": out}, indent=1, sort_keys=True))

asyncio.run(main())
PY
echo "wrote crates/satchel-core/tests/data/mcp-tool-schemas.json"
