"""The official MCP Python SDK as a client of `satchel mcp serve` (stdio):
a bash call with a progress callback, then a long call the client
abandons (which sends `notifications/cancelled`).

Usage: python_progress.py SATCHEL PROJECT ENV_JSON MARK
Prints one JSON object describing what the client saw; the Rust test
(`crates/satchel-cli/tests/cli/peers.rs`) checks it and that the abandoned
command's process is gone.
"""

import asyncio
import json
import sys
import time

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client


def dump(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def main() -> None:
    satchel, project, env, mark = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
    params = StdioServerParameters(
        command=satchel, args=["-C", project, "mcp", "serve"], env=env
    )
    report = {"progress": []}

    async def on_progress(progress, total, message):
        report["progress"].append({"progress": progress, "total": total, "message": message})

    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            script = "for i in 1 2 3; do echo line$i; sleep 0.8; done"
            result = await session.call_tool(
                "bash", {"command": script}, progress_callback=on_progress
            )
            report["result"] = dump(result)

            # A call the client gives up on: the SDK tells the server.
            started = time.monotonic()
            with anyio.move_on_after(2):
                await session.call_tool("bash", {"command": f"sleep {mark}"})
            report["abandoned_after"] = time.monotonic() - started
            # The server is still serving this session.
            after = await session.call_tool("bash", {"command": "echo still here"})
            report["after"] = dump(after)
            # Give the server a moment to stop the abandoned command.
            await asyncio.sleep(1.0)
    print(json.dumps(report))


asyncio.run(main())
