#!/usr/bin/env python3
"""Converts a mini-swe-agent trajectory (`.traj.json`) into a Satchel cassette.

mini-swe-agent keeps one `messages` list: the system prompt, the task, then
each model reply (a THOUGHT and one ```bash block) followed by what the
agent sent back (`<returncode>`/`<output>`, or a format error when a reply
held no block or several). Each model reply becomes one cassette line: the
request as Satchel's OpenAI-compatible provider writes it (the
conversation so far, the shell offered as one `bash` tool) and the reply as
a server-sent-event stream (the thought as text, the command as a `bash`
call). A reply the agent refused is kept as text with no call, and the
agent's refusal as the user message it was. Tool results are the
observations exactly as the model read them. No model or network is needed
to run it.

With `--last-only` only the last request is written: it holds the whole
session (the conversation up to the last reply, and that reply), which is
all `satchel bench history` reads, at a fiftieth of the size (each request
of a cassette repeats the conversation before it).

Usage: mini_swe_agent_to_cassette.py TRAJ OUT.jsonl [--model NAME] [--last-only]
"""

import json
import re
import sys

BASH = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run one shell command in the repository and return its "
        "exit code and output.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}

BLOCK = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)


def sse(events):
    return ["data: " + json.dumps(e, separators=(",", ":")) for e in events] + [
        "data: [DONE]",
        "",
    ]


def answer_events(turn, model, thought, command):
    chunk = lambda delta, finish=None: {
        "id": f"chatcmpl-{turn}",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    events = [chunk({"role": "assistant", "content": thought})]
    if command is None:
        events.append(chunk({}, "stop"))
    else:
        call = {
            "index": 0,
            "id": f"call_{turn}",
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": command})},
        }
        events += [chunk({"tool_calls": [call]}), chunk({}, "tool_calls")]
    return sse(events)


def split_reply(content):
    """(thought, command): the command is None unless exactly one block."""
    blocks = BLOCK.findall(content)
    if len(blocks) != 1:
        return content.strip(), None
    thought = content[: content.index("```bash")].strip()
    return thought, blocks[0].strip()


def main():
    args = sys.argv[1:]
    model = None
    last_only = "--last-only" in args
    if last_only:
        args.remove("--last-only")
    if "--model" in args:
        at = args.index("--model")
        model = args[at + 1]
        del args[at : at + 2]
    traj_path, out_path = args
    with open(traj_path) as f:
        traj = json.load(f)
    if model is None:
        configured = traj.get("info", {}).get("config", {}).get("model", {})
        model = configured.get("model_name", "gpt-4o").split("/")[-1]
    history = traj["messages"]
    first = next(i for i, m in enumerate(history) if m["role"] == "assistant")
    messages = [{"role": m["role"], "content": m["content"]} for m in history[:first]]
    lines = [{"satchel_cassette": 1}, {"kind": "server", "model": model, "info": None}]
    turn = 0
    rest = history[first:]
    for index, message in enumerate(rest):
        if message["role"] != "assistant":
            continue
        turn += 1
        thought, command = split_reply(message["content"])
        body = {"model": model, "messages": list(messages), "tools": [BASH], "stream": True}
        lines.append(
            {
                "seq": turn,
                "request": {
                    "method": "POST",
                    "url": "https://api.openai.com/v1/chat/completions",
                    "headers": {"accept": "text/event-stream", "content-type": "application/json"},
                    "body": body,
                },
                "response": {
                    "status": 200,
                    "headers": {"content-type": "text/event-stream"},
                    "events": answer_events(turn, model, thought, command),
                },
            }
        )
        said = {"role": "assistant", "content": thought}
        if command is not None:
            said["tool_calls"] = [
                {
                    "id": f"call_{turn}",
                    "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps({"command": command})},
                }
            ]
        messages.append(said)
        reply = rest[index + 1]["content"] if index + 1 < len(rest) else None
        if reply is None:
            continue
        if command is None:
            messages.append({"role": "user", "content": reply})
        else:
            messages.append({"role": "tool", "tool_call_id": f"call_{turn}", "content": reply})
    if last_only:
        lines = lines[:2] + lines[-1:]
    with open(out_path, "w") as out:
        for line in lines:
            out.write(json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
