"""One MCP `tools/call` of `bash` through the official MCP Python SDK, to
an installed `satchel` (scripts/smoke-dist runs it for each artifact).

Usage: smoke_mcp.py PROJECT COMMAND [ARG...]
Runs `COMMAND ARG... -C PROJECT mcp serve` over stdio with this process's
environment; exits 0 when the call answered as expected, else 1 with why.
"""

import asyncio
import os
import sys

from mcp import ClientSession, StdioServerParameters, stdio_client

EXPECTED = "hello from an installed satchel\n"


async def main() -> int:
    project, command, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    params = StdioServerParameters(
        command=command,
        args=[*args, "-C", project, "mcp", "serve"],
        env=dict(os.environ),
        cwd=project,
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await asyncio.wait_for(session.initialize(), 120)
            result = await asyncio.wait_for(
                session.call_tool("bash", {"command": f"printf '{EXPECTED.strip()}\\n'"}),
                60,
            )
    stdout = (result.structured_content or {}).get("stdout")
    if result.is_error or stdout != EXPECTED:
        print(f"tools/call bash answered unexpectedly: {result}", file=sys.stderr)
        return 1
    print(f"  mcp: {init.server_info.name} {init.server_info.version}: bash said {stdout.strip()!r}")
    return 0


sys.exit(asyncio.run(main()))
