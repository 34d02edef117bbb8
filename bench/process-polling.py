#!/usr/bin/env python3
"""Polling cost of background processes (issue #48), side by side in one run.

A command prints about 10 MB/s. Satchel (`satchel mcp serve`, driven by the
official MCP Python SDK client) runs it two ways:

- baseline: a foreground `bash` call of the command's first second
  (`timeout 1 CMD`), repeated RUNS times: wall time per call, and Satchel's
  CPU time per second of the call;
- polling: the same command started with `bash` `background: true`, then
  `process` `output` called every INTERVAL seconds for SECONDS seconds:
  p50 and p90 wall time per call, and Satchel's CPU time per second of
  polling (reading 10 MB/s into the unread buffer and the capped spill file
  included).

Satchel's CPU time is read from /proc/PID/stat (utime + stime) of the
server process before and after each phase. The table prints the ratios of
polling to the baseline.

Usage: bench/process-polling.py [SECONDS] [INTERVAL] [RUNS]
  (defaults 10, 0.25, 5). SATCHEL_BIN=path/to/satchel (default:
  target/release/satchel, else target/debug/satchel). Run it with the Python
  of the test peers (.peers/venv/bin/python), which has the `mcp` package.
Every run gets a temporary project, config, data and cache directory.
"""

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcp import ClientSession, StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")
PRODUCER = (
    "python3 -c \"import sys,time\n"
    "line=b'x'*99+b'\\n'\n"
    "block=line*1000\n"
    "while True:\n"
    " sys.stdout.buffer.write(block); sys.stdout.flush(); time.sleep(0.01)\""
)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15; `fields` starts at field 3.
    return (int(fields[11]) + int(fields[12])) / TICKS


def binary() -> str:
    if os.environ.get("SATCHEL_BIN"):
        return os.environ["SATCHEL_BIN"]
    for profile in ("release", "debug"):
        path = ROOT / "target" / profile / "satchel"
        if path.exists():
            return str(path)
    sys.exit("no satchel binary: build one or set SATCHEL_BIN")


async def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    interval = float(sys.argv[2]) if len(sys.argv) > 2 else 0.25
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    satchel = binary()
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        (work / "project/.agents").mkdir(parents=True)
        (work / "project/.agents/agent.json").write_text(
            json.dumps({"permissions": {"mode": "trust"}})
        )
        env = {
            "XDG_CONFIG_HOME": str(work / "config"),
            "XDG_DATA_HOME": str(work / "data"),
            "XDG_CACHE_HOME": str(work / "cache"),
            "SATCHEL_DB": str(work / "data/satchel.db"),
            "SATCHEL_MODEL_FETCH": "never",
            "SATCHEL_TRUST_PROJECT": "1",
            "TMPDIR": str(work),
            "NO_COLOR": "1",
        }
        params = StdioServerParameters(
            command=satchel, args=["-C", str(work / "project"), "mcp", "serve"], env=env
        )
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()

                async def call(name, args):
                    result = await session.call_tool(name, args)
                    return result.structured_content or {}

                server = int((await call("bash", {"command": "echo $PPID"}))["stdout"])

                # Baseline: the command's first second in the foreground.
                walls, cpus = [], []
                for _ in range(runs):
                    cpu0, t0 = cpu_seconds(server), time.monotonic()
                    await call("bash", {"command": f"timeout 1 {PRODUCER}"})
                    wall = time.monotonic() - t0
                    walls.append(wall)
                    cpus.append((cpu_seconds(server) - cpu0) / wall)

                # Polling a background process that prints 10 MB/s.
                started = await call(
                    "bash", {"command": PRODUCER, "background": True, "wait": 0}
                )
                pid = started["process_id"]
                latencies, read_bytes = [], 0
                cpu0, t0 = cpu_seconds(server), time.monotonic()
                while time.monotonic() - t0 < seconds:
                    c0 = time.monotonic()
                    out = await call("process", {"action": "output", "process_id": pid})
                    latencies.append(time.monotonic() - c0)
                    read_bytes += len(out.get("output", "")) + out.get("omitted_bytes", 0)
                    await asyncio.sleep(interval)
                elapsed = time.monotonic() - t0
                poll_cpu = (cpu_seconds(server) - cpu0) / elapsed
                await call("process", {"action": "kill", "process_id": pid})

    base_wall = statistics.median(walls)
    base_cpu = statistics.median(cpus)
    p50 = statistics.median(latencies)
    p90 = sorted(latencies)[int(len(latencies) * 0.9) - 1]
    rate = read_bytes / elapsed / 1e6
    print(f"satchel: {satchel}")
    print(f"producer: ~{rate:.1f} MB/s read through `process output` over {elapsed:.1f} s, "
          f"{len(latencies)} calls every {interval} s; baseline: {runs} foreground calls")
    print()
    print(f"{'measure':58} {'value':>10} {'vs baseline':>12}")
    print(f"{'foreground bash, first second: wall per call (s)':58} {base_wall:10.3f} {'1.00x':>12}")
    print(f"{'foreground bash, first second: Satchel CPU s per s':58} {base_cpu:10.3f} {'1.00x':>12}")
    print(f"{'process output: p50 wall per call (ms)':58} {p50 * 1000:10.1f} {p50 / base_wall:11.3f}x")
    print(f"{'process output: p90 wall per call (ms)':58} {p90 * 1000:10.1f} {p90 / base_wall:11.3f}x")
    print(f"{'polling: Satchel CPU s per s':58} {poll_cpu:10.3f} {poll_cpu / base_cpu:11.2f}x")


asyncio.run(main())
