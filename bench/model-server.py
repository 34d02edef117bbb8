#!/usr/bin/env python3
"""Satchel against a real model server: llama.cpp's server (llama-cpp-python)
serving SmolLM2-135M-Instruct, both installed by scripts/install-model-server.sh.

Measures, on one fixed 10-statement session per setting, each setting with
its own server (llama.cpp caches one prompt prefix per server), run in
turn statement by statement so the machine's drift hits every setting
alike:
  1. time to the first byte of the answer and wall time per `satchel run`
     statement with side requests as Satchel schedules them
     (`sideRequestTiming: auto`, which is sequential on a local server),
     against `sideRequests: false` (the baseline) and against side requests
     sent in parallel with the answer; ratios are taken pair by pair;
  2. the share of prompted-mode replies that parse, with and without
     constrained replies;
  3. the error of the token estimate against the usage the server reported,
     before and after calibration (each call calibrated only from the calls
     before it, as Satchel does).

With --llama-server: llama.cpp's own `llama-server` (one slot, `-c 8192`,
queueing requests) and Satchel's defaults for a new user (no output limit
configured, tool calling and constrained replies as `auto` decides), N
statements (default 8) with side requests as scheduled and N with
`sideRequests: false`, the order alternating statement by statement:
time to the first byte and to the answer on stdout (its last byte), wall
time, requests per statement, and the ratios to `sideRequests: false`.

With --fresh as well, each statement runs in a new conversation: a
resumed conversation's prompt carries the goal and objective that side
requests wrote, and a small model given another prompt takes another path,
which the resumed measurement cannot tell apart from a delay.

Usage: bench/model-server.py [--satchel target/debug/satchel] [--statements 10]
       bench/model-server.py --llama-server [--statements 8] [--fresh]
Prints a markdown table. Nothing here touches the user's state: every
setting gets its own temporary project, XDG directories and database.
"""

import argparse
import json
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = os.path.join(ROOT, ".peers")
MODEL = "smollm2-135m"
PROMPTS = [
    "say hello in five words",
    "what is a file system? one sentence",
    "name three colours",
    "what is 2 + 2?",
    "write a haiku about rain",
    "what is the capital of France?",
    "give me one tip for writing tests",
    "what does ls do?",
    "name a planet",
    "thank you, goodbye",
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_llama_server(log_dir, context=8192):
    binary = os.path.join(PEERS, "llama-server/bin/llama-server")
    model = os.path.join(PEERS, "models/smollm2-135m.gguf")
    for path in (binary, model):
        if not os.path.exists(path):
            sys.exit(f"{path} is missing: run scripts/install-model-server.sh")
    port = free_port()
    server = subprocess.Popen(
        [binary, "-m", model, "--jinja", "--host", "127.0.0.1", "--port", str(port),
         "-np", "1", "-c", str(context), "--alias", MODEL]
        # On a shared machine: one thread, pinned by the caller (taskset).
        + (["-t", os.environ["SATCHEL_BENCH_LLAMA_THREADS"]]
           if os.environ.get("SATCHEL_BENCH_LLAMA_THREADS") else []),
        stdout=open(os.path.join(log_dir, "server.log"), "w"), stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2)
            return server, f"http://127.0.0.1:{port}/v1"
        except OSError:
            time.sleep(0.3)
    server.kill()
    sys.exit("llama-server did not start")


def start_server(log_dir):
    python = os.path.join(PEERS, "llm-venv/bin/python")
    model = os.path.join(PEERS, "models/smollm2-135m.gguf")
    for path in (python, model):
        if not os.path.exists(path):
            sys.exit(f"{path} is missing: run scripts/install-model-server.sh")
    port = free_port()
    server = subprocess.Popen(
        [python, "-m", "llama_cpp.server", "--model", model, "--host", "127.0.0.1",
         "--port", str(port), "--chat_format", "chatml-function-calling",
         "--n_ctx", "8192", "--model_alias", MODEL],
        stdout=open(os.path.join(log_dir, "server.log"), "w"), stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2)
            return server, f"http://127.0.0.1:{port}/v1"
        except OSError:
            time.sleep(0.3)
    server.kill()
    sys.exit("the model server did not start")


class Project:
    def __init__(self, satchel, base, name, config):
        self.satchel = satchel
        self.dir = os.path.join(base, name)
        os.makedirs(os.path.join(self.dir, "project/.agents"))
        with open(os.path.join(self.dir, "project/.agents/agent.json"), "w") as f:
            json.dump(config, f)
        self.conversation = None
        # Each statement in a new conversation (--fresh): what one setting's
        # side requests wrote never reaches its later prompts.
        self.fresh = False
        self.results = []  # (first byte s, wall s, exit code, answer on stdout s)

    def env(self):
        env = {k: v for k, v in os.environ.items()
               if k not in ("SATCHEL_DB", "SATCHEL_MODEL", "OPENAI_BASE_URL", "RUST_LOG")}
        env.update(XDG_CONFIG_HOME=os.path.join(self.dir, "config"),
                   XDG_DATA_HOME=os.path.join(self.dir, "data"),
                   XDG_CACHE_HOME=os.path.join(self.dir, "cache"),
                   TMPDIR=self.dir, NO_COLOR="1",
                   # Its own temporary project: trusted, so agent.json is read.
                   SATCHEL_TRUST_PROJECT="1")
        return env

    def db(self):
        return sqlite3.connect(os.path.join(self.dir, "data/satchel/satchel.db"))

    def run(self, prompt):
        args = [self.satchel, "run"]
        if self.conversation and not self.fresh:
            args += ["--resume", self.conversation]
        args.append(prompt)
        start = time.monotonic()
        child = subprocess.Popen(args, cwd=os.path.join(self.dir, "project"), env=self.env(),
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 stdin=subprocess.DEVNULL)
        first = child.stdout.read(1)
        first_at = time.monotonic() - start
        # The answer is on stdout when its last byte is: nothing follows it
        # there (notices and side-request notes go to stderr).
        last_at = first_at if first else None
        while True:
            chunk = child.stdout.read1(65536)
            if not chunk:
                break
            last_at = time.monotonic() - start
        code = child.wait()
        wall = time.monotonic() - start
        self.results.append((first_at if first else None, wall, code, last_at))
        if self.conversation is None:
            row = self.db().execute(
                "SELECT id FROM conversations ORDER BY created_at DESC LIMIT 1").fetchone()
            self.conversation = row[0] if row else None


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


def ratios(a, b, index):
    pairs = [(x[index], y[index]) for x, y in zip(a.results, b.results)
             if x[index] is not None and y[index] is not None and y[index] > 0]
    return [x / y for x, y in pairs]


def spread(values):
    if not values:
        return "n/a"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def parse_share(project):
    db = project.db()
    turns = db.execute("SELECT COUNT(*) FROM llm_calls WHERE purpose = 'turn'").fetchone()[0]
    unreadable = db.execute(
        "SELECT COUNT(DISTINCT statement_id || '/' || turn) FROM tool_calls "
        "WHERE tool = '(unreadable reply)'").fetchone()[0]
    cut = db.execute("SELECT COUNT(*) FROM llm_calls WHERE purpose = 'turn' "
                     "AND stop_reason = 'max_tokens'").fetchone()[0]
    return turns, unreadable, cut


def estimate_errors(projects):
    before, after = [], []
    for project in projects:
        rows = project.db().execute(
            "SELECT estimate_tokens, input_tokens FROM llm_calls WHERE input_tokens > 0 "
            "AND estimate_tokens > 0 ORDER BY created_at, id").fetchall()
        seen = []
        for estimate, reported in rows:
            before.append(abs(estimate - reported) / reported)
            # As satchel_llm::Calibration: the last 20 pairs whose ratio is
            # plausible (0.25 to 4), weighted by size.
            window = [(e, r) for e, r in seen[-20:] if 0.25 <= r / e <= 4.0]
            if window:
                ratio = sum(r for _, r in window) / sum(e for e, _ in window)
                after.append(abs(estimate * ratio - reported) / reported)
            seen.append((estimate, reported))
    return before, after


def requests_per_statement(project):
    rows = project.db().execute(
        "SELECT statement_id, COUNT(*) FROM llm_calls WHERE statement_id IS NOT NULL "
        "GROUP BY statement_id").fetchall()
    return [count for _, count in rows]


def llama_server_side_requests(args):
    statements = args.statements or 8
    prompts = (PROMPTS * (statements // len(PROMPTS) + 1))[:statements]
    base = tempfile.mkdtemp(prefix="satchel-bench-")
    servers = []
    try:
        def project(name, **extra):
            log_dir = os.path.join(base, f"server-{name}")
            os.makedirs(log_dir)
            server, url = start_llama_server(log_dir)
            servers.append(server)
            llm = {"provider": "openai", "baseUrl": url, "model": MODEL, "temperature": 0}
            return Project(args.satchel, base, name, {"llm": llm, **extra})

        # One server each: llama.cpp keeps one prompt cache per slot.
        side = project("side")
        none = project("none", sideRequests=False)
        side.fresh = none.fresh = args.fresh
        for n, prompt in enumerate(prompts):
            order = (side, none) if n % 2 == 0 else (none, side)
            for p in order:
                p.run(prompt)
                print(".", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        print(f"Satchel's defaults against llama-server (one slot, -c 8192) + SmolLM2-135M, "
              f"{statements} statements each way, order alternating, "
              + ("each in a new conversation\n" if args.fresh else "one conversation each way\n"))
        print("| setting | first byte, median s | answer on stdout, median s | wall, median s "
              "| requests per statement, median (max) | exit codes |")
        print("|---|---:|---:|---:|---:|---|")
        for name, p in (("side requests as scheduled", side), ("sideRequests: false", none)):
            codes = ",".join(str(r[2]) for r in p.results)
            per = requests_per_statement(p)
            print(f"| {name} | {median(r[0] for r in p.results):.2f} | "
                  f"{median(r[3] for r in p.results):.2f} | "
                  f"{median(r[1] for r in p.results):.2f} | "
                  f"{median(per):.0f} ({max(per) if per else 0}) | {codes} |")
        print("\n| ratio to sideRequests: false, pair by pair | median (min-max) | "
              "ratio of the medians |")
        print("|---|---:|---:|")
        for label, index in (("first byte", 0), ("answer on stdout", 3), ("wall", 1)):
            of_medians = (median(r[index] for r in side.results)
                          / median(r[index] for r in none.results))
            print(f"| {label} | {spread(ratios(side, none, index))} | {of_medians:.2f} |")
    finally:
        for server in servers:
            server.kill()
            server.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--satchel", default=os.path.join(ROOT, "target/debug/satchel"))
    parser.add_argument("--statements", type=int, default=None)
    parser.add_argument("--llama-server", action="store_true",
                        help="side-request delay on llama-server with Satchel's defaults")
    parser.add_argument("--fresh", action="store_true",
                        help="with --llama-server: each statement in a new conversation, so the "
                             "goals side requests write never change a later prompt and the "
                             "ratio is the scheduling's alone")
    args = parser.parse_args()
    if args.llama_server:
        llama_server_side_requests(args)
        return
    args.statements = args.statements or 10
    prompts = (PROMPTS * (args.statements // len(PROMPTS) + 1))[:args.statements]
    base = tempfile.mkdtemp(prefix="satchel-bench-")
    # One server per setting: llama.cpp keeps one prompt (prefix) cache per
    # server, and one setting's requests must not warm or spoil another's.
    servers = []

    def server_url():
        log_dir = os.path.join(base, f"server-{len(servers)}")
        os.makedirs(log_dir)
        server, url = start_server(log_dir)
        servers.append(server)
        return url

    try:
        def config(**extra):
            url = server_url()
            llm = {"provider": "openai", "baseUrl": url, "model": MODEL, "temperature": 0,
                   "maxOutputTokens": 120, "toolCalling": "native"}
            llm.update(extra.pop("llm", {}))
            return {"llm": llm, "permissions": {"allow": ["bash"]}, "maxTurns": 3, **extra}

        timing = {
            "side requests, as scheduled (auto: sequential)": Project(
                args.satchel, base, "sequential", config()),
            "side requests in parallel with the answer": Project(
                args.satchel, base, "parallel", config(sideRequestTiming="parallel")),
            "no side requests (baseline)": Project(
                args.satchel, base, "none", config(sideRequests=False)),
        }
        prompted = {
            "constrained": Project(args.satchel, base, "constrained", config(
                llm={"toolCalling": "prompted", "constrainedReplies": "on", "stream": False,
                     "maxOutputTokens": 200}, sideRequests=False, maxTurns=2)),
            "unconstrained": Project(args.satchel, base, "unconstrained", config(
                llm={"toolCalling": "prompted", "constrainedReplies": "off", "stream": False,
                     "maxOutputTokens": 200}, sideRequests=False, maxTurns=2)),
        }
        for prompt in prompts:
            for project in list(timing.values()) + list(prompted.values()):
                project.run(prompt)
                print(".", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)

        baseline = timing["no side requests (baseline)"]
        print(f"Satchel against llama-cpp-python + SmolLM2-135M, {len(prompts)} statements "
              "per setting, run in turn\n")
        print("| setting | first byte, median s | wall, median s | first byte ÷ baseline "
              "(median, min-max) | wall ÷ baseline | exit codes |")
        print("|---|---:|---:|---:|---:|---|")
        for name, project in timing.items():
            codes = ",".join(str(r[2]) for r in project.results)
            print(f"| {name} | {median(r[0] for r in project.results):.2f} | "
                  f"{median(r[1] for r in project.results):.2f} | "
                  f"{spread(ratios(project, baseline, 0))} | "
                  f"{spread(ratios(project, baseline, 1))} | {codes} |")
        print("\n| prompted replies | turns | unreadable | of which cut at the token limit "
              "| parsed |")
        print("|---|---:|---:|---:|---:|")
        for name, project in prompted.items():
            turns, unreadable, cut = parse_share(project)
            share = 100.0 * (turns - unreadable) / turns if turns else float("nan")
            print(f"| {name} | {turns} | {unreadable} | {cut} | {share:.0f}% |")
        before, after = estimate_errors(list(timing.values()) + list(prompted.values()))
        print("\n| estimate vs reported input tokens | calls | mean abs error | median "
              "| max |")
        print("|---|---:|---:|---:|---:|")
        for name, errors in (("before calibration (cl100k count)", before),
                             ("after calibration", after)):
            if errors:
                print(f"| {name} | {len(errors)} | {100 * statistics.mean(errors):.1f}% | "
                      f"{100 * statistics.median(errors):.1f}% | {100 * max(errors):.1f}% |")
    finally:
        for server in servers:
            server.kill()
            server.wait()


if __name__ == "__main__":
    main()
