"""The official MCP Python SDK as a client of `satchel mcp serve` (stdio)
that declares roots: Satchel's `write` (and `bash`) may write beneath the
client's roots only, not the server's project. The client then moves its
root to NEXT_ROOT, announces it (`notifications/roots/list_changed`) and
calls at once: the call must see the new root.

Usage: python_roots.py SATCHEL PROJECT ENV_JSON ROOT NEXT_ROOT [URL]
Over stdio, or over streamable HTTP when URL (a running `mcp serve --http`)
is given. Prints one JSON object describing what the client saw.
"""

import asyncio
import json
import pathlib
import sys

from mcp import ClientSession, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client


def dump(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def main() -> None:
    satchel, project, env = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    root, next_root = sys.argv[4], sys.argv[5]
    current = [root]
    params = StdioServerParameters(
        command=satchel, args=["-C", project, "mcp", "serve"], env=env
    )
    asked = []

    async def list_roots(context):
        asked.append(True)
        return types.ListRootsResult(
            roots=[types.Root(uri=pathlib.Path(current[0]).as_uri(), name="work")]
        )

    report = {}
    transport = streamable_http_client(sys.argv[6]) if len(sys.argv) > 6 else stdio_client(params)
    async with transport as (read, write, *_):
        async with ClientSession(read, write, list_roots_callback=list_roots) as session:
            report["protocol"] = (await session.initialize()).protocol_version
            calls = {
                "in_root": ("write", {"file_path": f"{root}/made.txt", "content": "in the root\n"}),
                "in_project": ("write", {"file_path": "project.txt", "content": "in the project\n"}),
                "bash_in_project": ("bash", {"command": "echo x > bash.txt"}),
                "bash_in_root": ("bash", {"command": f"echo x > {root}/bash.txt"}),
            }
            for key, (name, arguments) in calls.items():
                report[key] = dump(await session.call_tool(name, arguments))
            report["asked_before_the_change"] = len(asked)
            current[0] = next_root
            await session.send_roots_list_changed()
            moved = {
                "in_next_root": ("write", {"file_path": f"{next_root}/moved.txt", "content": "moved\n"}),
                "in_old_root": ("write", {"file_path": f"{root}/stale.txt", "content": "stale\n"}),
            }
            for key, (name, arguments) in moved.items():
                report[key] = dump(await session.call_tool(name, arguments))
    report["asked"] = len(asked)
    print(json.dumps(report))


asyncio.run(main())
