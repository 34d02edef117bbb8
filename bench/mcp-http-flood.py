#!/usr/bin/env python3
"""Flood `satchel mcp serve --http` with `initialize` requests and report memory.

Starts the server in a throw-away project (its own XDG directories, so the
user's state is never touched), reads its resident memory (VmRSS from
/proc/PID/status, and its anonymous and file-backed parts), opens one session on each connection and reads it again
(the baseline for what sessions keep: code run for the first time and
first-use allocations stay for the process's life), sends N `initialize`
requests (each opens a session and never closes it, as a careless or
hostile client would), reads the memory again, and prints a table:
requests, answers by HTTP status, time taken, RSS before and after.

Python 3 standard library only. Examples:

    cargo build -p satchel-cli
    python3 bench/mcp-http-flood.py -n 10000
    python3 bench/mcp-http-flood.py -n 10000 -- --max-sessions 1000000   # no cap in practice
    python3 bench/mcp-http-flood.py --binary target/release/satchel -n 10000
    python3 bench/mcp-http-flood.py -n 10000 --settle 20 -- --session-idle 5s   # after expiry

Arguments after `--` go to `satchel mcp serve --http 127.0.0.1:0`.
"""

import argparse
import collections
import http.client
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import threading
import time

INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "flood", "version": "1"},
        },
    }
).encode()

HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
}


def rss_kib(pid):
    """VmRSS of `pid` in KiB, and its anonymous and file-backed parts."""
    found = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "RssAnon", "RssFile"):
                found[name] = int(value.split()[0])
    if "VmRSS" not in found:
        raise RuntimeError(f"no VmRSS for {pid}")
    return found["VmRSS"], found.get("RssAnon", 0), found.get("RssFile", 0)


def start(binary, extra, root):
    """Starts the server in a project under `root`; returns (process, host, port)."""
    project = root / "project"
    (project / ".agents").mkdir(parents=True)
    (project / ".agents" / "agent.json").write_text("{}")
    env = dict(os.environ)
    for name in ("SATCHEL_DB", "SATCHEL_MCP_TOKEN", "RUST_LOG"):
        env.pop(name, None)
    env.update(
        XDG_CONFIG_HOME=str(root / "config"),
        XDG_DATA_HOME=str(root / "data"),
        XDG_CACHE_HOME=str(root / "cache"),
        TMPDIR=str(root),
    )
    process = subprocess.Popen(
        [binary, "mcp", "serve", "--http", "127.0.0.1:0", *extra],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in process.stderr:
        found = re.search(r"http://([0-9.]+):(\d+)/", line)
        if found:
            # Keep draining stderr so the server never blocks on it.
            threading.Thread(target=lambda: [None for _ in process.stderr], daemon=True).start()
            return process, found.group(1), int(found.group(2))
    raise RuntimeError(f"satchel exited before serving: {process.wait()}")


def flood(host, port, count, workers):
    """Sends `count` initialize requests over `workers` keep-alive connections."""
    statuses = collections.Counter()
    lock = threading.Lock()
    remaining = [count]

    def worker():
        connection = http.client.HTTPConnection(host, port, timeout=60)
        while True:
            with lock:
                if remaining[0] == 0:
                    break
                remaining[0] -= 1
            try:
                connection.request("POST", "/mcp", INITIALIZE, HEADERS)
                response = connection.getresponse()
                response.read()
                status = response.status
                if response.getheader("Connection", "").lower() == "close":
                    connection.close()
                    connection = http.client.HTTPConnection(host, port, timeout=60)
            except (OSError, http.client.HTTPException) as error:
                status = type(error).__name__
                connection.close()
                connection = http.client.HTTPConnection(host, port, timeout=60)
            with lock:
                statuses[status] += 1
        connection.close()

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses


def mib(memory):
    """`RSS (anonymous + file-backed)` in MiB."""
    rss, anon, file = memory
    return f"{rss / 1024:.1f} MiB ({anon / 1024:.1f} anonymous + {file / 1024:.1f} file-backed)"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--requests", type=int, default=10_000)
    parser.add_argument("-c", "--connections", type=int, default=8)
    parser.add_argument("--binary", default="target/debug/satchel")
    parser.add_argument(
        "--settle",
        type=float,
        default=2.0,
        help="seconds to wait after the flood before reading RSS again "
        "(past --session-idle, to see memory come back once sessions expire)",
    )
    parser.add_argument("serve_args", nargs="*", help="extra `mcp serve` arguments (after --)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as root:
        process, host, port = start(os.path.abspath(args.binary), args.serve_args, pathlib.Path(root))
        try:
            time.sleep(0.5)
            before = rss_kib(process.pid)
            # One session on each connection first: what a served client
            # leaves for good (code first run, first-use allocations) is
            # in this baseline, what sessions keep is not.
            flood(host, port, args.connections, args.connections)
            time.sleep(0.5)
            warm = rss_kib(process.pid)
            started = time.monotonic()
            statuses = flood(host, port, args.requests, args.connections)
            elapsed = time.monotonic() - started
            after = rss_kib(process.pid)
            time.sleep(args.settle)
            settled = rss_kib(process.pid)
        finally:
            process.terminate()
            process.wait()

    answers = ", ".join(f"{status}: {n}" for status, n in sorted(statuses.items(), key=str))
    rows = [
        ("serve arguments", " ".join(args.serve_args) or "(defaults)"),
        ("initialize requests", f"{args.requests} over {args.connections} connections"),
        ("answers by status", answers),
        ("time taken", f"{elapsed:.2f} s ({args.requests / elapsed:.0f} requests/s)"),
        ("RSS before", mib(before)),
        (f"RSS after {args.connections} sessions", mib(warm)),
        ("RSS after flood", mib(after)),
        (f"RSS {args.settle:g} s later", mib(settled)),
        ("later ÷ before", f"{settled[0] / before[0]:.2f}"),
        (f"later ÷ after {args.connections} sessions", f"{settled[0] / warm[0]:.2f}"),
        ("anonymous later ÷ before", f"{settled[1] / max(before[1], 1):.2f}"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
