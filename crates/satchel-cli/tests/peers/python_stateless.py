"""The official MCP Python SDK as a 2026-07-28 (stateless) client of
`satchel mcp serve --http`, with the tasks extension:

- an "ask" answered through `input_required` results: the user accepts a
  call whose question mentions "accepted" and declines the others;
- a long bash call run as a task, polled to its end (its status messages
  say how far it got);
- a long bash call run as a task and cancelled;
- a `subscriptions/listen` stream told when a memory layer changes.

Usage: python_stateless.py SATCHEL PROJECT ENV_JSON URL MARK
Prints one JSON object describing what the client saw.
"""

import asyncio
import json
import sys
from types import SimpleNamespace
from typing import Any, ClassVar, Literal

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from pydantic import ConfigDict, Field, TypeAdapter

RAW = TypeAdapter(dict[str, Any])

TASKS = "io.modelcontextprotocol/tasks"


class CreatedTask(types.Result):
    """A `tools/call` answered with a task (SEP-2663)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str


class GetTask(types.Request[dict[str, Any], Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    # The 2026-07-28 wire names the task in the Mcp-Name header.
    name_param: ClassVar[str | None] = "taskId"


class UpdateTask(types.Request[dict[str, Any], Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    name_param: ClassVar[str | None] = "taskId"


class CancelTask(types.Request[dict[str, Any], Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    # The 2026-07-28 wire names the task in the Mcp-Name header.
    name_param: ClassVar[str | None] = "taskId"


class Tasks(ClientExtension):
    """Resolves a task by polling it: answers its questions (`tasks/update`)
    as the user would, and cancels it when the report says so."""

    identifier = TASKS

    def __init__(self, report: dict, answer) -> None:
        self.report = report
        self.answer = answer

    def claims(self):
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self.resolve)]

    async def get(self, session, task_id: str) -> dict:
        return await session.send_request(GetTask(params={"taskId": task_id}), RAW)

    async def resolve(self, created: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
        seen = {"created": created.status, "statuses": [], "messages": []}
        self.report.setdefault("tasks", []).append(seen)
        cancel = "cancel-me" in json.dumps(self.report.get("calling", ""))
        with anyio.fail_after(60):
            while True:
                task = await self.get(ctx.session, created.task_id)
                seen["statuses"].append(task["status"])
                if task.get("statusMessage"):
                    seen["messages"].append(task["statusMessage"])
                if task["status"] in ("completed", "failed", "cancelled"):
                    seen["final"] = task
                    break
                if task["status"] == "input_required":
                    responses = {}
                    for key, request in task["inputRequests"].items():
                        params = SimpleNamespace(message=request["params"]["message"])
                        responses[key] = dump(await self.answer(None, params))
                    await ctx.session.send_request(
                        UpdateTask(params={"taskId": created.task_id, "inputResponses": responses}), RAW
                    )
                if cancel and len(seen["statuses"]) >= 2:
                    seen["cancel_ack"] = await ctx.session.send_request(
                        CancelTask(params={"taskId": created.task_id}), RAW
                    )
                    cancel = False
                await anyio.sleep(0.5)
        if task["status"] == "completed":
            return types.CallToolResult.model_validate(task["result"])
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"task {task['status']}")], is_error=True
        )


def dump(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def main() -> None:
    satchel, project, env, url, mark = sys.argv[1:6]
    env = json.loads(env)
    report: dict[str, Any] = {"questions": []}

    async def answer(context, params):
        report["questions"].append(params.message)
        action = "accept" if "accepted" in params.message else "decline"
        return types.ElicitResult(action=action, content={} if action == "accept" else None)

    tasks = Tasks(report, answer)
    async with Client(url, elicitation_callback=answer, extensions=[tasks]) as client:
        report["protocol"] = client.protocol_version
        report["capabilities"] = dump(client.server_capabilities)
        for key, command in [("accepted", "echo accepted"), ("declined", "echo declined")]:
            report[key] = dump(await client.call_tool("bash", {"command": command}))

        report["calling"] = "finish"
        finished = await client.call_tool(
            "bash",
            {"command": "for i in 1 2 3; do printf 'line %s\\n' $i; sleep 1; done", "timeout": 120},
        )
        report["finished"] = dump(finished)

        # A task whose command the policy asks about: the question is the
        # task's, answered with tasks/update.
        report["calling"] = "ask"
        asked = await client.call_tool(
            "bash", {"command": "echo accepted in a task", "timeout": 120}
        )
        report["asked"] = dump(asked)

        report["calling"] = "cancel-me"
        cancelled = await client.call_tool(
            "bash", {"command": f"sleep {mark}; printf 'too late'", "timeout": 600}
        )
        report["cancelled"] = dump(cancelled)

        async with client.listen(resource_subscriptions=["satchel://memories/short"]) as sub:
            report["honored"] = dump(sub.honored)
            store = await asyncio.create_subprocess_exec(
                satchel, "-C", project, "memory", "store", "short", "lunch is at noon",
                env=env, stdout=asyncio.subprocess.DEVNULL,
            )
            await store.wait()
            with anyio.move_on_after(20):
                async for event in sub:
                    report["event"] = repr(event)
                    break
    print(json.dumps(report))


asyncio.run(main())
