#!/usr/bin/env python3
"""Sequential `tools/call`s of `echo` to an MCP server over stdio; prints
the round trip's p50 and p90 in microseconds.

A client with little of its own cost, for A/B runs of one server change
(`bench/cost-per-call.sh` gives the issue's figures with the rmcp client).

    taskset -c 1 bench/echo-calls.py 3000 target/release/satchel mcp serve --echo-tool
    taskset -c 1 bench/echo-calls.py 3000 .peers/node_modules/.bin/mcp-server-everything stdio
    taskset -c 1 bench/echo-calls.py --roots 3000 target/release/satchel mcp serve --echo-tool

`--roots`: the client declares roots with `listChanged`, as Claude Code and
the Python SDK do, answers the server's `roots/list` with its directory,
and prints how many times it was asked.

The server gets temporary config, data and cache directories and database.
"""
import json
import os
import subprocess
import sys
import tempfile
import time


def main():
    arguments = sys.argv[1:]
    roots = arguments[:1] == ["--roots"]
    if roots:
        arguments = arguments[1:]
    calls, command = int(arguments[0]), arguments[1:]
    # The server runs in a directory of its own: a path given relative to
    # here is made absolute first.
    if os.sep in command[0]:
        command[0] = os.path.abspath(command[0])
    state = tempfile.mkdtemp()
    env = dict(
        os.environ,
        XDG_CONFIG_HOME=f"{state}/config",
        XDG_DATA_HOME=f"{state}/data",
        XDG_CACHE_HOME=f"{state}/cache",
        SATCHEL_DB=f"{state}/data/satchel.db",
        SATCHEL_MODEL_FETCH="never",
    )
    server = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=state
    )

    def send(message):
        server.stdin.write((json.dumps(message) + "\n").encode())
        server.stdin.flush()

    asked = 0

    def answer():
        nonlocal asked
        while True:
            message = json.loads(server.stdout.readline())
            if message.get("method") == "roots/list":
                asked += 1
                send({"jsonrpc": "2.0", "id": message["id"], "result": {
                    "roots": [{"uri": f"file://{state}", "name": "state"}]}})
            elif "id" in message:
                return message

    capabilities = {"roots": {"listChanged": True}} if roots else {}
    send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
          "params": {"protocolVersion": "2025-06-18", "capabilities": capabilities,
                     "clientInfo": {"name": "echo-calls", "version": "1"}}})
    answer()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    times = []
    for n in range(calls):
        started = time.perf_counter()
        send({"jsonrpc": "2.0", "id": n + 1, "method": "tools/call",
              "params": {"name": "echo", "arguments": {
                  "message": "the quick brown fox jumps over the lazy dog"}}})
        reply = answer()
        times.append(time.perf_counter() - started)
        if "result" not in reply or reply["result"].get("isError"):
            sys.exit(f"call {n + 1} failed: {reply}")
    times.sort()
    asked_note = f"  roots asked {asked} times" if roots else ""
    print(f"p50 {times[len(times) // 2] * 1e6:.1f} µs  p90 {times[int(len(times) * 0.9)] * 1e6:.1f} µs{asked_note}")
    server.stdin.close()
    server.wait()


if __name__ == "__main__":
    main()
