"""The official MCP Python SDK as a client of `satchel mcp serve`: an MCP
session is to the server what a conversation is to `chat`.

- Over stdio, the stale-file rule holds within the session: a file read,
  then changed on disk by someone else, is not edited; a file never read
  is not overwritten by `write`; after reading it again the edit lands.
- Over HTTP, two sessions: the first starts a background process, the
  second does not see it, and when the first closes (the SDK deletes the
  session) its process ends while the server goes on.

Usage: python_sessions.py SATCHEL PROJECT ENV_JSON URL SLEEP_SECONDS
Prints one JSON object describing what the client saw; the Rust test
(`crates/satchel-cli/tests/cli/mcp_sessions.rs`) checks it and the machine.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


def fields(result):
    return {
        "is_error": result.is_error,
        "structured": result.structured_content,
        "text": "".join(getattr(c, "text", "") for c in result.content),
    }


async def stale_rule(satchel, project, env, report):
    params = StdioServerParameters(
        command=satchel, args=["-C", project, "mcp", "serve"], env=env
    )
    path = os.path.join(project, "notes.txt")
    other = os.path.join(project, "other.txt")
    with open(path, "w") as f:
        f.write("alpha\nbeta\n")
    with open(other, "w") as f:
        f.write("not read\n")
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            call = session.call_tool
            report["read"] = fields(await call("read", {"file_path": path}))
            with open(path, "w") as f:
                f.write("alpha\nbeta\ngamma\n")
            report["stale_edit"] = fields(
                await call("edit", {"file_path": path, "old_string": "beta", "new_string": "BETA"})
            )
            report["blind_write"] = fields(
                await call("write", {"file_path": other, "content": "replaced\n"})
            )
            await call("read", {"file_path": path})
            report["fresh_edit"] = fields(
                await call("edit", {"file_path": path, "old_string": "beta", "new_string": "BETA"})
            )
    with open(path) as f:
        report["notes_after"] = f.read()
    with open(other) as f:
        report["other_after"] = f.read()


async def http_sessions(url, seconds, report):
    command = f"sleep {seconds}"
    async with streamable_http_client(url) as (read_b, write_b):
        async with ClientSession(read_b, write_b) as second:
            await second.initialize()
            async with streamable_http_client(url) as (read_a, write_a):
                async with ClientSession(read_a, write_a) as first:
                    await first.initialize()
                    started = await first.call_tool(
                        "bash", {"command": command, "background": True, "wait": 0}
                    )
                    report["started"] = fields(started)
                    report["first_list"] = fields(await first.call_tool("process", {"action": "list"}))
                    report["second_list"] = fields(await second.call_tool("process", {"action": "list"}))
            # The first session is closed (deleted); the second still works.
            report["second_after"] = fields(await second.call_tool("process", {"action": "list"}))


async def main() -> None:
    satchel, project, env = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    url, seconds = sys.argv[4], sys.argv[5]
    report = {}
    await stale_rule(satchel, project, env, report)
    await http_sessions(url, seconds, report)
    print(json.dumps(report))


asyncio.run(main())
