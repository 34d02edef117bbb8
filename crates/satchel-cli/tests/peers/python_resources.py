"""The official MCP Python SDK as a client of `satchel mcp serve` (stdio),
reading Satchel's record as resources.

Usage: python_resources.py SATCHEL PROJECT ENV_JSON
Prints one JSON object describing what the client saw.
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError


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
            report["capabilities"] = dump(init.capabilities)
            report["resources"] = [dump(r) for r in (await session.list_resources()).resources]
            report["templates"] = [
                dump(t) for t in (await session.list_resource_templates()).resource_templates
            ]
            report["long"] = dump(await session.read_resource("satchel://memories/long"))
            try:
                await session.read_resource("satchel://conversations/no-such-id")
                report["unknown"] = "no error"
            except MCPError as error:
                report["unknown"] = {"code": error.error.code, "data": error.error.data}
    print(json.dumps(report))


asyncio.run(main())
