#!/usr/bin/env python3
"""What tracing costs a statement: `satchel run` of a statement that makes
20 tool calls (20 turns of one `bash` call each, then an answer), against a
scripted OpenAI-compatible model on 127.0.0.1, with OpenTelemetry export on
(to a live OTLP receiver: crates/satchel-cli/tests/cli/support/otlp_receiver.py)
and off, alternating, in one invocation. Prints the median wall time of
each and on ÷ off.

Usage: PYTHON_WITH_OTEL_PROTO=.peers/venv/bin/python \\
       bench/tracing-cost.py [--runs N] [--satchel target/debug/satchel]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CALLS = 20
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sse(chunks):
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"


def chunk(delta, finish=None, usage=None):
    body = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage:
        body["usage"] = usage
    return body


class Model(BaseHTTPRequestHandler):
    """Answers each main request by how many tool results it already holds:
    a `bash` call until there are CALLS, then the answer. Side requests
    (Satchel's side-request system prompt) get a short note."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        messages = body.get("messages", [])
        system = messages[0].get("content", "") if messages else ""
        usage = {"prompt_tokens": 100, "completion_tokens": 8, "total_tokens": 108}
        if isinstance(system, str) and system.startswith("You write short notes"):
            chunks = [chunk({"role": "assistant", "content": "NOTE"}), chunk({}, "stop", usage)]
        else:
            done = sum(1 for m in messages if m.get("role") == "tool")
            if done < CALLS:
                call = {
                    "index": 0,
                    "id": f"call_{done}",
                    "type": "function",
                    # A different command each turn: the same call with the
                    # same result three times in a row is a loop Satchel stops.
                    "function": {"name": "bash", "arguments": json.dumps({"command": f"true {done}"})},
                }
                chunks = [
                    chunk({"role": "assistant", "tool_calls": [call]}),
                    chunk({}, "tool_calls", usage),
                ]
            else:
                chunks = [chunk({"role": "assistant", "content": "Done."}), chunk({}, "stop", usage)]
        data = sse(chunks).encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args):
        pass


def serve(handler):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--satchel", default=os.path.join(ROOT, "target/debug/satchel"))
    args = parser.parse_args()
    python = os.environ.get("PYTHON_WITH_OTEL_PROTO", os.path.join(ROOT, ".peers/venv/bin/python"))

    model = serve(Model)
    base = f"http://127.0.0.1:{model.server_address[1]}/v1"
    work = tempfile.mkdtemp(prefix="satchel-tracing-bench-")
    port_file = os.path.join(work, "port")
    received = os.path.join(work, "received.jsonl")
    receiver = subprocess.Popen(
        [python, os.path.join(ROOT, "crates/satchel-cli/tests/cli/support/otlp_receiver.py"),
         port_file, received],
    )
    try:
        while not os.path.exists(port_file):
            if receiver.poll() is not None:
                sys.exit("the OTLP receiver did not start (is opentelemetry-proto installed?)")
            time.sleep(0.05)
        endpoint = f"http://127.0.0.1:{open(port_file).read().strip()}"
        project = os.path.join(work, "project")
        os.makedirs(os.path.join(project, ".agents"))
        with open(os.path.join(project, ".agents/agent.json"), "w") as f:
            json.dump(
                {
                    "llm": {"provider": "openai", "baseUrl": base, "model": "gpt-4o", "maxRetries": 0},
                    "permissions": {"allow": ["bash"]},
                    "maxTurns": CALLS + 5,
                },
                f,
            )
        env = dict(os.environ)
        for key in list(env):
            if key.startswith("OTEL_") or key in ("SATCHEL_DB", "OPENAI_API_KEY", "RUST_LOG"):
                del env[key]
        env.update(
            {
                "XDG_CONFIG_HOME": os.path.join(work, "config"),
                "XDG_DATA_HOME": os.path.join(work, "data"),
                "XDG_CACHE_HOME": os.path.join(work, "cache"),
                "SATCHEL_TRUST_PROJECT": "1",
                "SATCHEL_MODEL_FETCH": "never",
                "NO_COLOR": "1",
            }
        )
        traced = dict(env)
        traced.update(
            {
                "OTEL_TRACES_EXPORTER": "otlp",
                "OTEL_METRICS_EXPORTER": "otlp",
                "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            }
        )

        def once(environment):
            started = time.perf_counter()
            result = subprocess.run(
                [args.satchel, "run", "--json", "run true twenty times"],
                cwd=project, env=environment, capture_output=True, text=True,
            )
            elapsed = time.perf_counter() - started
            if result.returncode != 0:
                sys.exit(f"satchel run failed: {result.stderr[-2000:]}")
            transcript = json.loads(result.stdout)
            assert len(transcript["tool_calls"]) == CALLS, transcript["tool_calls"]
            return elapsed

        once(env)  # warm the caches (tool specs, the database)
        off, on = [], []
        for _ in range(args.runs):
            off.append(once(env))
            on.append(once(traced))
        spans = sum(1 for line in open(received) if '"type": "span"' in line)
        off_ms, on_ms = statistics.median(off) * 1000, statistics.median(on) * 1000
        print(f"| {CALLS} tool calls, {args.runs} runs each | off ms | on ms | on ÷ off |")
        print("|---|---:|---:|---:|")
        print(f"| `satchel run` (whole process), median | {off_ms:.1f} | {on_ms:.1f} | {on_ms / off_ms:.3f} |")
        print(f"\n{spans} spans received by the live receiver over {args.runs} traced runs.")
    finally:
        receiver.kill()
        model.shutdown()


if __name__ == "__main__":
    main()
