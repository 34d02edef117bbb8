"""The official MCP Python SDK as a client of `satchel mcp serve` (stdio),
driving background processes: an HTTP server started with `bash`
`background: true`, waited for with `process` `output` `until`, fetched
by a foreground `curl`, then killed; a command whose children leave the
group and the session; three reads; the end of a process told once;
the limit; and, last, how the session ends.

Usage: python_background.py SATCHEL PROJECT ENV_JSON PORT MARK ENDING
ENDING is `close` (the client leaves), `sigterm` or `sigkill` (sent to
the server with three processes running, one trapping TERM).
Prints one JSON object describing what the client saw; the Rust test
(`crates/satchel-cli/tests/cli/background.rs`) checks it and the machine.
"""

import asyncio
import json
import os
import signal
import sys

from mcp import ClientSession, StdioServerParameters, stdio_client


def fields(result):
    return {
        "is_error": result.is_error,
        "structured": result.structured_content,
        "text": "".join(getattr(c, "text", "") for c in result.content),
    }


async def main() -> None:
    satchel, project, env = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    port, mark, ending = sys.argv[4], sys.argv[5], sys.argv[6]
    params = StdioServerParameters(
        command=satchel, args=["-C", project, "mcp", "serve"], env=env
    )
    report = {}
    try:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()

                async def call(name, args):
                    return fields(await session.call_tool(name, args))

                if ending == "close":
                    server = f"exec python3 -m http.server {port} --bind 127.0.0.1"
                    report["start"] = await call(
                        "bash", {"command": server, "background": True, "wait": 0}
                    )
                    pid = report["start"]["structured"]["process_id"]
                    report["serving"] = await call(
                        "process",
                        {"action": "output", "process_id": pid, "until": "Serving HTTP", "wait": 20},
                    )
                    report["curl"] = await call(
                        "bash",
                        {"command": f"curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{port}/"},
                    )
                    report["kill"] = await call("process", {"action": "kill", "process_id": pid})
                    report["kill_again"] = await call("process", {"action": "kill", "process_id": pid})

                    family = f"sh -c 'sleep 999.{mark} & setsid sleep 998.{mark} & wait'"
                    started = await call("bash", {"command": family, "background": True, "wait": 0.5})
                    report["family_kill"] = await call(
                        "process", {"action": "kill", "process_id": started["structured"]["process_id"]}
                    )

                    lines = await call(
                        "bash",
                        {"command": "echo line 1; sleep 1; echo line 2; sleep 60", "background": True, "wait": 0.3},
                    )
                    lid = lines["structured"]["process_id"]
                    report["lines"] = [lines["structured"]["output"]]
                    second = await call("process", {"action": "output", "process_id": lid, "until": "line 2"})
                    report["lines"].append(second["structured"]["output"])
                    third = await call("process", {"action": "output", "process_id": lid})
                    report["lines"].append(third["structured"]["output"])
                    await call("process", {"action": "kill", "process_id": lid})

                    # The end is told once, in the first result after it is
                    # seen: the start's own (its state) when the process
                    # ended before the start returned, else a later call's
                    # notice.
                    report["told"] = await call(
                        "bash", {"command": "echo done; exit 4", "background": True, "wait": 0}
                    )
                    report["told_in"] = "start"
                    if report["told"]["structured"]["state"] == "running":
                        report["told_in"] = "notice"
                        for _ in range(20):
                            if "Background process ended" in report["told"]["text"]:
                                break
                            await asyncio.sleep(0.5)
                            report["told"] = await call("bash", {"command": "true"})
                    report["told_again"] = await call("bash", {"command": "true"})

                # Three processes left running for the ending, one trapping TERM.
                for script in [
                    f"sleep 996.{mark}",
                    f"trap '' TERM; sleep 995.{mark}; sleep 995.{mark}",
                    f"sleep 994.{mark} & setsid sleep 993.{mark} & wait",
                ]:
                    await call("bash", {"command": script, "background": True, "wait": 0})
                if ending == "close":
                    # exec.maxBackground is 3: a fourth is refused, with the list.
                    report["limit"] = await call(
                        "bash", {"command": f"sleep 992.{mark}", "background": True, "wait": 0}
                    )
                    report["list"] = await call("process", {"action": "list"})
                    report["missing_id"] = await call("process", {"action": "output"})
                else:
                    await asyncio.sleep(0.5)
                    ppid = await call("bash", {"command": "echo $PPID"})
                    server_pid = int(ppid["structured"]["stdout"].strip())
                    report["server_pid"] = server_pid
                    os.kill(server_pid, signal.SIGTERM if ending == "sigterm" else signal.SIGKILL)
                    await asyncio.sleep(3 if ending == "sigterm" else 0.5)
    except BaseException as error:  # the server went away under the client
        report["client_error"] = type(error).__name__
    print(json.dumps(report))


asyncio.run(main())
