"""The official MCP Python SDK as a client of `satchel mcp serve` (stdio).

Usage: python_client.py SATCHEL PROJECT ENV_JSON
Prints one JSON object describing what the client saw; the Rust test
(`crates/satchel-cli/tests/peers.rs`) checks it.
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters, stdio_client


def dump(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def main() -> None:
    satchel, project, env = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    params = StdioServerParameters(
        command=satchel, args=["-C", project, "mcp", "serve"], env=env
    )
    report = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            report["initialize"] = dump(init)
            report["tools"] = [dump(tool) for tool in (await session.list_tools()).tools]
            calls = {
                "ok": ("bash", {"command": "echo from python"}),
                "exit3": ("bash", {"command": "exit 3"}),
                "invalid": ("bash", {"command": "true", "timeout": -1}),
                "missing": ("no_such_tool", {}),
                "external": ("shout", {"text": "hey"}),
            }
            for key, (name, arguments) in calls.items():
                report[key] = dump(await session.call_tool(name, arguments))
    print(json.dumps(report))


asyncio.run(main())
