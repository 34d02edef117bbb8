"""The official MCP Python SDK as a client of `satchel mcp serve`, which
imports a stdio server (the Python SDK's, from `satchel-mcp`'s fault
tests) whose `crash` tool exits the server mid-call.

Usage: python_crash.py SATCHEL PROJECT ENV_JSON
Prints {"crash": RESULT, "back_after": SECONDS, "hello": RESULT}: the
crashed call's result, how long after it the server's `hello` answered
again, and that answer.
"""

import asyncio
import json
import sys
import time

from mcp import ClientSession, StdioServerParameters, stdio_client


def dump(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def main() -> None:
    satchel, project, env = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    params = StdioServerParameters(command=satchel, args=["-C", project, "mcp", "serve"], env=env)
    report = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            deadline = time.monotonic() + 30
            while True:
                hello = dump(await session.call_tool("crashy__hello", {"who": "first"}))
                if not hello.get("isError") or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.1)
            report["first"] = hello
            report["crash"] = dump(await session.call_tool("crashy__crash", {"after": 0.3}))
            crashed = time.monotonic()
            while True:
                hello = dump(await session.call_tool("crashy__hello", {"who": "again"}))
                if not hello.get("isError") or time.monotonic() - crashed > 30:
                    break
                await asyncio.sleep(0.05)
            report["back_after"] = time.monotonic() - crashed
            report["hello"] = hello
    print(json.dumps(report))


asyncio.run(main())
