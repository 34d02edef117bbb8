"""The official MCP Python SDK as a client of `satchel mcp serve` (stdio,
2025-11-25 session), reading Satchel's record as resources: every kind,
and a subscription that hears of a change.

Usage: python_resources.py SATCHEL PROJECT ENV_JSON CONVERSATION_ID
Prints one JSON object describing what the client saw.
"""

import asyncio
import json
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client, types
from mcp.shared.exceptions import MCPError


def dump(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def main() -> None:
    satchel, project, env = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    conversation = sys.argv[4]
    params = StdioServerParameters(
        command=satchel, args=["-C", project, "mcp", "serve"], env=env
    )
    report = {"read": {}}
    updated = anyio.Event()
    updates = []

    async def on_message(message):
        root = getattr(message, "root", message)
        if isinstance(root, types.ResourceUpdatedNotification):
            updates.append(root.params.uri)
            updated.set()

    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            init = await session.initialize()
            report["capabilities"] = dump(init.capabilities)
            report["resources"] = [dump(r) for r in (await session.list_resources()).resources]
            report["templates"] = [
                dump(t) for t in (await session.list_resource_templates()).resource_templates
            ]
            # The conversation's record names its tool calls.
            as_json = await session.read_resource(f"satchel://conversations/{conversation}/json")
            tool_call = json.loads(as_json.contents[0].text)["tool_calls"][0]["id"]
            report["tool_call"] = tool_call
            for uri in [
                f"satchel://conversations/{conversation}",
                f"satchel://conversations/{conversation}/json",
                f"satchel://tool-calls/{tool_call}",
                "satchel://code/stats",
                "satchel://code/executions",
                "satchel://memories/long",
                "satchel://memories/mid",
                "satchel://memories/short",
                "satchel://memories/session",
            ]:
                report["read"][uri] = dump(await session.read_resource(uri))
            try:
                await session.read_resource("satchel://conversations/no-such-id")
                report["unknown"] = "no error"
            except MCPError as error:
                report["unknown"] = {"code": error.error.code, "data": error.error.data}

            # A subscription hears of a memory stored by another process.
            await session.subscribe_resource("satchel://memories/mid")
            store = await asyncio.create_subprocess_exec(
                satchel, "-C", project, "memory", "store", "mid", "the deploy key rotates on Mondays",
                env=env, stdout=asyncio.subprocess.DEVNULL,
            )
            await store.wait()
            with anyio.move_on_after(20):
                await updated.wait()
            report["updates"] = updates
            await session.unsubscribe_resource("satchel://memories/mid")
    print(json.dumps(report))


asyncio.run(main())
