#!/usr/bin/env python3
"""What hooks and skills cost (issue #41), against baselines measured in
the same run.

1. A tool call's added latency with a trivial `PreToolUse` and
   `PostToolUse` hook (`cat > /dev/null`, the user's own, so unsandboxed),
   p50 over CALLS calls of `bash {"command": "true"}`, against the same
   calls without hooks (the duration Satchel records for each call covers
   the hooks), and against the hook process's own start-up: `sh -c
   'cat > /dev/null'` with the same JSON on stdin, spawned CALLS times by
   this script. Target: the added latency per hook within 1.5x of that
   start-up.
2. The prompt tokens of 20 skills listed in the system prompt, as
   `satchel context` counts them. Target: at most 30 tokens per skill.

A scripted model on 127.0.0.1 (OpenAI chat completions, whole answers)
asks for the calls one per turn. Every run gets its own config, data and
cache directories: nothing of the user's is read or written.

Usage: bench/hooks.py [CALLS]   (default 40)
  SATCHEL_BIN=path/to/satchel (default target/debug/satchel, built with
  `cargo build -p satchel-cli` if missing).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CALLS = int(sys.argv[1]) if len(sys.argv) > 1 else 40


def satchel_bin():
    path = os.environ.get("SATCHEL_BIN")
    if path:
        return path
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    binary = target / "debug" / "satchel"
    if not binary.exists():
        subprocess.run(["cargo", "build", "-q", "-p", "satchel-cli"], cwd=ROOT, check=True)
    return str(binary)


class Model(BaseHTTPRequestHandler):
    """Asks for `bash true` until CALLS results came back, then answers."""

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if "messages" not in body:
            self.send_response(404)
            self.end_headers()
            return
        done = sum(1 for m in body["messages"] if m.get("role") == "tool")
        if done < CALLS:
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{done}", "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": "true"})}}]}
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": "done"}
            finish = "stop"
        reply = json.dumps({
            "id": "x", "object": "chat.completion", "created": 0, "model": "gpt-4o",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


def project(work, name, url, hooks, skills=0):
    """A project and user directories; returns the environment to run in."""
    base = Path(work) / name
    (base / "project").mkdir(parents=True)
    config = base / "config" / "satchel"
    config.mkdir(parents=True)
    agent = {
        "llm": {"provider": "openai", "baseUrl": url, "model": "gpt-4o", "maxRetries": 0,
                "stream": False},
        "permissions": {"allow": ["bash"]},
        "sideRequests": False,
        "maxTurns": CALLS + 5,
    }
    if hooks:
        trivial = [{"type": "command", "command": "cat > /dev/null"}]
        agent["hooks"] = {"PreToolUse": [{"matcher": "Bash", "hooks": trivial}],
                          "PostToolUse": [{"matcher": "Bash", "hooks": trivial}]}
    (config / "agent.json").write_text(json.dumps(agent))
    for i in range(skills):
        folder = config / "skills" / f"skill-{i:02d}"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: {SKILL_NAMES[i]}\ndescription: {SKILL_DESCRIPTIONS[i]}\n---\n"
            "# Instructions\nSteps the model reads only when it loads the skill.\n")
    env = dict(os.environ)
    for var in ["RUST_LOG", "SATCHEL_DB", "SATCHEL_LIBEXEC_DIR", "OPENAI_API_KEY"]:
        env.pop(var, None)
    env.update({"XDG_CONFIG_HOME": str(base / "config"), "XDG_DATA_HOME": str(base / "data"),
                "XDG_CACHE_HOME": str(base / "cache"), "SATCHEL_MODEL_FETCH": "never",
                "NO_COLOR": "1"})
    return base / "project", env


# Descriptions in the style of public skills (Anthropic's and others'):
# what the skill does and when to use it, one or two sentences.
SKILL_NAMES = [
    "pdf", "docx", "xlsx", "pptx", "webapp-testing", "mcp-builder", "skill-creator",
    "frontend-design", "changelog", "release-notes", "sql-migrations", "api-docs",
    "git-bisect", "flaky-tests", "dependency-audit", "dockerfile", "terraform-plan",
    "incident-report", "code-review", "benchmarking",
]
SKILL_DESCRIPTIONS = [
    "Extract text and tables from PDFs, fill PDF forms, merge and split documents. Use when working with PDF files.",
    "Create and edit Word documents with tracked changes, comments and formatting. Use for .docx files.",
    "Read, write and analyse spreadsheets with formulas and charts. Use when the task involves .xlsx or .csv files.",
    "Build and edit slide decks: layouts, speaker notes, charts. Use when asked for a presentation.",
    "Test local web applications with Playwright: screenshots, console logs, user flows.",
    "Guide for building MCP servers that let models use external services through well-designed tools.",
    "Create a new skill or update an existing one: structure, front matter, scripts and references.",
    "Build distinctive, production-grade web interfaces; avoid generic styling. Use for UI work.",
    "Write a changelog entry from the commits since the last tag, grouped by kind of change.",
    "Draft release notes for users from merged pull requests, highlighting breaking changes.",
    "Write reversible SQL migrations and check them against a scratch database before committing.",
    "Generate and check API reference docs from the source's doc comments and OpenAPI files.",
    "Find the commit that introduced a regression with git bisect and a scripted check.",
    "Reproduce and diagnose flaky tests by running them repeatedly under load and recording failures.",
    "Audit dependencies for known vulnerabilities and outdated versions; propose minimal upgrades.",
    "Write small, cache-friendly Dockerfiles with multi-stage builds and non-root users.",
    "Run terraform plan, summarise the changes and flag destructive ones before apply.",
    "Write a blameless incident report: timeline, impact, root cause, follow-up actions.",
    "Review a diff for bugs, security issues and style; leave concrete, actionable comments.",
    "Measure performance against a baseline in the same run and report ratios with medians.",
]


def run_calls(binary, cwd, env):
    out = subprocess.run([binary, "run", "--json", "go"], cwd=cwd, env=env,
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        sys.exit(f"satchel run failed:\n{out.stderr}")
    transcript = json.loads(out.stdout)
    calls = [c for c in transcript["tool_calls"] if c["tool"] == "bash"]
    if len(calls) != CALLS:
        sys.exit(f"expected {CALLS} calls, got {len(calls)}")
    return [c["duration_us"] / 1000 for c in calls]


def hook_process(runs):
    payload = json.dumps({"session_id": "s", "hook_event_name": "PreToolUse",
                          "tool_name": "Bash", "tool_input": {"command": "true"}}).encode()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(["sh", "-c", "cat > /dev/null"], input=payload, check=True)
        times.append((time.perf_counter() - start) * 1000)
    return times


def main():
    binary = satchel_bin()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Model)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    with tempfile.TemporaryDirectory() as work:
        plain_cwd, plain_env = project(work, "plain", url, hooks=False)
        hooked_cwd, hooked_env = project(work, "hooked", url, hooks=True)
        # Interleaved runs so a drift of the machine moves both.
        plain, hooked, spawn = [], [], []
        for _ in range(2):
            plain += run_calls(binary, plain_cwd, plain_env)
            hooked += run_calls(binary, hooked_cwd, hooked_env)
            spawn += hook_process(CALLS)
        audit = subprocess.run([binary, "audit", "--json", "--limit", "100000"], cwd=hooked_cwd,
                               env=hooked_env, capture_output=True, text=True, check=True)
        hook_runs = [row["duration_us"] / 1000 for row in json.loads(audit.stdout)
                     if row["tool"].startswith("hook:")]
        p_plain, p_hooked, p_spawn = (statistics.median(x) for x in (plain, hooked, spawn))
        p_run = statistics.median(hook_runs)
        added = p_hooked - p_plain
        per_hook = added / 2

        skills_cwd, skills_env = project(work, "skills", url, hooks=False, skills=20)
        run_calls(binary, skills_cwd, skills_env)
        context = subprocess.run([binary, "context", "--json"], cwd=skills_cwd, env=skills_env,
                                 capture_output=True, text=True, check=True)
        report = json.loads(context.stdout)
        skill_tokens = report["skill_tokens"]
    server.shutdown()

    print(f"satchel: {binary}; {CALLS * 2} calls of `bash true` per row, p50 (ms)")
    print()
    print(f"{'':56} {'p50 ms':>8} {'ratio':>7}")
    print(f"{'tool call, no hooks (baseline)':56} {p_plain:8.2f} {1:7.2f}")
    print(f"{'tool call, PreToolUse + PostToolUse (cat > /dev/null)':56} {p_hooked:8.2f} {p_hooked / p_plain:7.2f}")
    print(f"{'  added per call':56} {added:8.2f}")
    print(f"{'  added per hook':56} {per_hook:8.2f}")
    print(f"{'  of which the hook process, as Satchel timed it':56} {p_run:8.2f}")
    print(f"{'  the rest (input, matching, sandbox setup, audit row)':56} {per_hook - p_run:8.2f}")
    print(f"{'hook process alone: sh -c cat (spawned from Python)':56} {p_spawn:8.2f}")
    print(f"{'added per hook / hook process start-up (target <= 1.5)':56} {'':8} {per_hook / p_spawn:7.2f}")
    print()
    print(f"20 skills listed: {skill_tokens} tokens, {skill_tokens / 20:.1f} per skill (target <= 30)")


if __name__ == "__main__":
    main()
