"""A server of the official MCP Python SDK that only adds crashes.

`crashy_server.py stdio`: over stdio; `crashy_server.py http PORT`: over
streamable HTTP (both protocol revisions, as the SDK serves them);
`crashy_server.py die`: says why on stderr and exits with status 3 before
speaking MCP. Its tools: `hello` answers, `slow` sleeps, `crash` exits
the whole process mid-call (`os._exit(1)`).
"""

import asyncio
import os
import sys

mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
if mode == "die":
    print("cannot open the database at /nonexistent/crashy.db", file=sys.stderr, flush=True)
    sys.exit(3)

from mcp.server.mcpserver import MCPServer  # noqa: E402  (after the early exit)

app = MCPServer("crashy")


@app.tool()
def hello(who: str = "world") -> str:
    """Says hello."""
    return f"hello {who}"


@app.tool()
async def slow(seconds: float = 30) -> str:
    """Sleeps, then answers."""
    await asyncio.sleep(seconds)
    return "done"


@app.tool()
async def crash(after: float = 0.5) -> str:
    """Exits the whole server mid-call."""
    await asyncio.sleep(after)
    os._exit(1)


if mode == "http":
    app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
else:
    app.run()
