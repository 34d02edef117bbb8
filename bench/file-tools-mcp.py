#!/usr/bin/env python3
"""Satchel's `edit` and `read` against Desktop Commander's `edit_block` and
`read_file`, each in its running MCP server, called by the official MCP
Python SDK client over stdio (issue #40).

Two servers start once: `satchel mcp serve` (release build by default) and
Desktop Commander 0.2.52 (`@wonderwhy-er/desktop-commander`, installed into
.peers/bench by this script when missing, with its browser download and
install scripts skipped). Each gets its own copy of the same files:
  - `big.txt`, 10 MB of text (200,000 lines): `edit` of one line in the
    middle (the line flips between two values, so every call changes it);
  - `long.txt`, 5,000 lines: `read` of 2,000 lines from line 1,001.
Calls alternate between the servers, call by call, so a drift of the
machine's speed moves both; p50 and p90 of each, and Satchel's p50 over
Desktop Commander's.

Usage: .peers/venv/bin/python bench/file-tools-mcp.py [--satchel PATH] [--calls N]
Nothing here touches the user's state: every server gets its own HOME,
XDG directories and database under a temporary directory.
"""

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from mcp import ClientSession, StdioServerParameters, stdio_client

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DC_VERSION = "0.2.52"
DC_PREFIX = os.path.join(ROOT, ".peers/bench")
DC_MAIN = os.path.join(DC_PREFIX, "node_modules/@wonderwhy-er/desktop-commander/dist/index.js")


def install_dc():
    if os.path.exists(DC_MAIN):
        return
    os.makedirs(DC_PREFIX, exist_ok=True)
    env = dict(os.environ, PUPPETEER_SKIP_DOWNLOAD="1")
    subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", "--prefix", DC_PREFIX,
         f"@wonderwhy-er/desktop-commander@{DC_VERSION}"],
        check=True, env=env, stdout=subprocess.DEVNULL)


def make_files(directory):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "big.txt"), "w") as f:
        for n in range(200_000):
            f.write(f"line {n:06d} of the big file, padded to fifty bytes.\n")
    with open(os.path.join(directory, "long.txt"), "w") as f:
        for n in range(5_000):
            f.write(f"line {n} of a long file that a model reads in pages\n")


def text_of(result):
    return "".join(getattr(part, "text", "") for part in result.content)


async def timed(session, name, arguments):
    start = time.perf_counter()
    result = await session.call_tool(name, arguments)
    elapsed = time.perf_counter() - start
    if result.is_error:
        sys.exit(f"{name} failed: {text_of(result)[:500]}")
    return elapsed, result


async def run(args, base):
    satchel_dir = os.path.join(base, "satchel/project")
    dc_dir = os.path.join(base, "dc/work")
    make_files(satchel_dir)
    make_files(dc_dir)
    satchel_env = {
        "PATH": os.environ.get("PATH", ""),
        "XDG_CONFIG_HOME": os.path.join(base, "satchel/config"),
        "XDG_DATA_HOME": os.path.join(base, "satchel/data"),
        "XDG_CACHE_HOME": os.path.join(base, "satchel/cache"),
        "SATCHEL_DB": os.path.join(base, "satchel/satchel.db"),
        "SATCHEL_MODEL_FETCH": "never",
        "SATCHEL_TRUST_PROJECT": "1",
        "NO_COLOR": "1",
    }
    dc_home = os.path.join(base, "dc/home")
    os.makedirs(os.path.join(dc_home, ".claude-server-commander"))
    with open(os.path.join(dc_home, ".claude-server-commander/config.json"), "w") as f:
        json.dump({"telemetryEnabled": False, "allowedDirectories": [dc_dir],
                   "fileReadLineLimit": 2000, "fileWriteLineLimit": 2000}, f)
    dc_env = {"PATH": os.environ.get("PATH", ""), "HOME": dc_home}
    satchel = StdioServerParameters(command=args.satchel, args=["-C", satchel_dir, "mcp", "serve"],
                                    env=satchel_env, cwd=satchel_dir)
    dc = StdioServerParameters(command="node", args=[DC_MAIN, "--no-onboarding"], env=dc_env,
                               cwd=dc_dir)
    big_line = 100_000
    old = f"line {big_line:06d} of the big file, padded to fifty bytes."
    new = f"LINE {big_line:06d} of the big file, padded to fifty bytes."
    times = {key: [] for key in ("satchel edit", "dc edit", "satchel read", "dc read")}
    async with stdio_client(satchel) as (sr, sw), stdio_client(dc) as (dr, dw):
        async with ClientSession(sr, sw) as s, ClientSession(dr, dw) as d:
            await s.initialize()
            await d.initialize()
            # Warm both (and give Satchel's stale-file rule its first read).
            await timed(s, "read", {"file_path": "big.txt", "limit": 1})
            await timed(d, "read_file", {"path": os.path.join(dc_dir, "big.txt"), "length": 1})
            for n in range(args.calls):
                a, b = (old, new) if n % 2 == 0 else (new, old)
                order = [("satchel", s), ("dc", d)] if n % 2 == 0 else [("dc", d), ("satchel", s)]
                for who, session in order:
                    if who == "satchel":
                        t, _ = await timed(session, "edit", {"file_path": "big.txt", "old_string": a,
                                                            "new_string": b})
                        times["satchel edit"].append(t)
                        t, r = await timed(session, "read", {"file_path": "long.txt", "offset": 1001,
                                                            "limit": 2000})
                        times["satchel read"].append(t)
                    else:
                        t, _ = await timed(session, "edit_block", {
                            "file_path": os.path.join(dc_dir, "big.txt"), "old_string": a,
                            "new_string": b, "expected_replacements": 1})
                        times["dc edit"].append(t)
                        t, r = await timed(session, "read_file", {
                            "path": os.path.join(dc_dir, "long.txt"), "offset": 1000, "length": 2000})
                        times["dc read"].append(t)
    for directory in (satchel_dir, dc_dir):
        with open(os.path.join(directory, "big.txt")) as f:
            body = f.read()
        expected = old if args.calls % 2 == 0 else new
        if expected not in body or len(body.splitlines()) != 200_000:
            sys.exit(f"{directory}/big.txt was not edited as asked")
    return times


def quantile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--satchel", default=os.path.join(ROOT, "target/release/satchel"))
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    args.satchel = os.path.abspath(args.satchel)
    if not os.path.exists(args.satchel):
        sys.exit(f"{args.satchel} is missing: cargo build --release -p satchel-cli")
    install_dc()
    with tempfile.TemporaryDirectory(prefix="satchel-bench-files-") as base:
        times = asyncio.run(run(args, base))
    print(f"`edit` of one line in a 10 MB file and `read` of 2,000 lines, {args.calls} calls "
          "each, alternating, in running MCP servers (Python SDK client, stdio)\n")
    print("| call | Satchel p50 ms | p90 | Desktop Commander p50 ms | p90 | Satchel ÷ DC (p50) |")
    print("|---|---:|---:|---:|---:|---:|")
    for verb in ("edit", "read"):
        ours, theirs = times[f"satchel {verb}"], times[f"dc {verb}"]
        print(f"| {verb} | {1000 * statistics.median(ours):.1f} | {1000 * quantile(ours, 0.9):.1f} | "
              f"{1000 * statistics.median(theirs):.1f} | {1000 * quantile(theirs, 0.9):.1f} | "
              f"{statistics.median(ours) / statistics.median(theirs):.2f} |")


if __name__ == "__main__":
    main()
