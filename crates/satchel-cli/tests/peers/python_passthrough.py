"""Content through Satchel, seen by the official MCP Python SDK client:
`get-resource-reference` (text and blob) of the reference server called
directly, and through `satchel mcp serve` (which imports the same server).

Usage: python_passthrough.py SATCHEL PROJECT ENV_JSON EVERYTHING
Prints {"direct": {...}, "served": {...}}, each keyed by resource type
(and `annotated`, `links`: an annotated message, resource links) with the
result as the SDK parsed it.
"""

import asyncio
import json
import sys
import time

from mcp import ClientSession, StdioServerParameters, stdio_client


def dump(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def calls(params, name):
    seen = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for kind in ("Text", "Blob"):
                deadline = time.monotonic() + 30
                while True:
                    result = dump(await session.call_tool(name, {"resourceType": kind, "resourceId": 1}))
                    # Satchel imports the server in the background: wait for it.
                    text = json.dumps(result)
                    if not result.get("isError") or time.monotonic() > deadline:
                        break
                    if "TOOL_NOT_FOUND" not in text and "not running" not in text:
                        break
                    await asyncio.sleep(0.2)
                seen[kind] = result
            # Annotations on a text block, and a resource link.
            prefix = name[: -len("get-resource-reference")]
            seen["annotated"] = dump(
                await session.call_tool(prefix + "get-annotated-message", {"messageType": "error"})
            )
            seen["links"] = dump(await session.call_tool(prefix + "get-resource-links", {"count": 2}))
    return seen


async def main() -> None:
    satchel, project, env, everything = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
    direct = await calls(
        StdioServerParameters(command=everything, args=["stdio"], env=env),
        "get-resource-reference",
    )
    served = await calls(
        StdioServerParameters(command=satchel, args=["-C", project, "mcp", "serve"], env=env),
        "everything__get-resource-reference",
    )
    print(json.dumps({"direct": direct, "served": served}))


asyncio.run(main())
