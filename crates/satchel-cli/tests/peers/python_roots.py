"""The official MCP Python SDK as a client of `satchel mcp serve` (stdio)
that declares roots: Satchel's `write` (and `bash`) may write beneath the
client's roots only, not the server's project.

Usage: python_roots.py SATCHEL PROJECT ENV_JSON ROOT
Prints one JSON object describing what the client saw.
"""

import asyncio
import json
import pathlib
import sys

from mcp import ClientSession, StdioServerParameters, stdio_client, types


def dump(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def main() -> None:
    satchel, project, env, root = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
    params = StdioServerParameters(
        command=satchel, args=["-C", project, "mcp", "serve"], env=env
    )
    asked = []

    async def list_roots(context):
        asked.append(True)
        return types.ListRootsResult(roots=[types.Root(uri=pathlib.Path(root).as_uri(), name="work")])

    report = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, list_roots_callback=list_roots) as session:
            await session.initialize()
            calls = {
                "in_root": ("write", {"file_path": f"{root}/made.txt", "content": "in the root\n"}),
                "in_project": ("write", {"file_path": "project.txt", "content": "in the project\n"}),
                "bash_in_project": ("bash", {"command": "echo x > bash.txt"}),
                "bash_in_root": ("bash", {"command": f"echo x > {root}/bash.txt"}),
            }
            for key, (name, arguments) in calls.items():
                report[key] = dump(await session.call_tool(name, arguments))
    report["asked"] = len(asked)
    print(json.dumps(report))


asyncio.run(main())
