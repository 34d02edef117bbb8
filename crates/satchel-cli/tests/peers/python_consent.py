"""The official MCP Python SDK as a client of `satchel mcp serve` (stdio)
whose user answers Satchel's "ask" through elicitation: accepts a call
whose question mentions "accepted", declines the others.

Usage: python_consent.py SATCHEL PROJECT ENV_JSON
Prints one JSON object describing what the client saw.
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters, stdio_client, types


def dump(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def main() -> None:
    satchel, project, env = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    params = StdioServerParameters(
        command=satchel, args=["-C", project, "mcp", "serve"], env=env
    )
    report = {"questions": []}

    async def answer(context, params):
        report["questions"].append(params.message)
        action = "accept" if "accepted" in params.message else "decline"
        return types.ElicitResult(action=action, content={} if action == "accept" else None)

    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, elicitation_callback=answer) as session:
            await session.initialize()
            for key, command in [("accepted", "echo accepted"), ("declined", "echo declined")]:
                report[key] = dump(await session.call_tool("bash", {"command": command}))
            # Not held back by any rule: no question.
            report["unasked"] = dump(await session.call_tool("bash", {"command": "true"}))
    print(json.dumps(report))


asyncio.run(main())
