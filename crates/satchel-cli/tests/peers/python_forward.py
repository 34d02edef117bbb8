"""The official MCP Python SDK as a client of `satchel mcp serve` (stdio)
in the default sandbox: two servers started in the background on the
session's own loopback, one on a port listed in `exec.forwardPorts`. The
client (on the machine, outside the sandbox) reaches the forwarded one at
127.0.0.1 and not the other; once the server inside is killed, the
forwarded port answers nothing.

Usage: python_forward.py SATCHEL PROJECT ENV_JSON FORWARDED_PORT OTHER_PORT
Prints one JSON object describing what the client saw.
"""

import asyncio
import json
import sys
import urllib.request

from mcp import ClientSession, StdioServerParameters, stdio_client


def fields(result):
    return {
        "is_error": result.is_error,
        "structured": result.structured_content,
        "text": "".join(getattr(c, "text", "") for c in result.content),
    }


def get(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as answer:
            return {"status": answer.status}
    except Exception as error:  # what a browser would show
        return {"error": type(error).__name__}


async def main() -> None:
    satchel, project, env = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    forwarded, other = sys.argv[4], sys.argv[5]
    params = StdioServerParameters(
        command=satchel, args=["-C", project, "mcp", "serve"], env=env
    )
    report = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            call = session.call_tool
            for name, port in (("forwarded", forwarded), ("other", other)):
                command = f"exec python3 -m http.server {port} --bind 127.0.0.1"
                started = await call("bash", {"command": command, "background": True, "wait": 0})
                report[f"{name}_start"] = fields(started)
                process = started.structured_content["process_id"]
                report[f"{name}_serving"] = fields(
                    await call(
                        "process",
                        {"action": "output", "process_id": process, "until": "Serving HTTP", "wait": 20},
                    )
                )
            report["get_forwarded"] = await asyncio.to_thread(get, forwarded)
            report["get_other"] = await asyncio.to_thread(get, other)
            process = report["forwarded_start"]["structured"]["process_id"]
            report["kill"] = fields(await call("process", {"action": "kill", "process_id": process}))
            report["get_after_kill"] = await asyncio.to_thread(get, forwarded)
    print(json.dumps(report))


asyncio.run(main())
