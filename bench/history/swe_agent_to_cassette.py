#!/usr/bin/env python3
"""Converts a SWE-agent trajectory (`.traj`) into a Satchel cassette.

Each model call of the trajectory becomes one cassette line: the request as
Satchel's OpenAI-compatible provider writes it (the conversation so far,
SWE-agent's commands offered as one `bash` tool) and the model's recorded
answer as a server-sent-event stream (its thought as text, its command as
a `bash` call). Tool results are the observations SWE-agent recorded,
exactly as its model read them. No model or network is needed to run it.

Usage: swe_agent_to_cassette.py TRAJ OUT.jsonl [--model NAME]
"""

import json
import sys

BASH = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run one SWE-agent command (a shell command or one of its "
        "file-viewer and editor commands) and return its output.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}


def sse(events):
    return ["data: " + json.dumps(e, separators=(",", ":")) for e in events] + [
        "data: [DONE]",
        "",
    ]


def answer_events(turn, model, thought, command):
    call = {
        "index": 0,
        "id": f"call_{turn}",
        "type": "function",
        "function": {"name": "bash", "arguments": json.dumps({"command": command})},
    }
    chunk = lambda delta, finish=None: {
        "id": f"chatcmpl-{turn}",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return sse(
        [
            chunk({"role": "assistant", "content": thought}),
            chunk({"tool_calls": [call]}),
            chunk({}, "tool_calls"),
        ]
    )


def main():
    args = sys.argv[1:]
    model = "gpt4"
    if "--model" in args:
        at = args.index("--model")
        model = args[at + 1]
        del args[at : at + 2]
    traj_path, out_path = args
    with open(traj_path) as f:
        traj = json.load(f)
    history = traj["history"]
    steps = traj["trajectory"]
    # history: system, then user messages up to the first assistant one,
    # then assistant/user alternating (user = the observation as shown).
    first = next(i for i, m in enumerate(history) if m["role"] == "assistant")
    opening = [{"role": m["role"], "content": m["content"]} for m in history[:first]]
    shown = history[first:]
    assistants = [m for m in shown if m["role"] == "assistant"]
    observations = [m["content"] for m in shown if m["role"] == "user"]
    assert len(assistants) == len(steps), (len(assistants), len(steps))

    messages = list(opening)
    lines = [{"satchel_cassette": 1}, {"kind": "server", "model": model, "info": None}]
    for turn, step in enumerate(steps, start=1):
        thought = step["thought"].strip()
        command = step["action"].rstrip("\n")
        body = {
            "model": model,
            "messages": list(messages),
            "tools": [BASH],
            "stream": True,
        }
        lines.append(
            {
                "seq": turn,
                "request": {
                    "method": "POST",
                    "url": "https://api.openai.com/v1/chat/completions",
                    "headers": {
                        "accept": "text/event-stream",
                        "content-type": "application/json",
                    },
                    "body": body,
                },
                "response": {
                    "status": 200,
                    "headers": {"content-type": "text/event-stream"},
                    "events": answer_events(turn, model, thought, command),
                },
            }
        )
        messages.append(
            {
                "role": "assistant",
                "content": thought,
                "tool_calls": [
                    {
                        "id": f"call_{turn}",
                        "type": "function",
                        "function": {
                            "name": "bash",
                            "arguments": json.dumps({"command": command}),
                        },
                    }
                ],
            }
        )
        # The last command (`submit`) has no observation the model read.
        if turn <= len(observations):
            messages.append(
                {"role": "tool", "tool_call_id": f"call_{turn}", "content": observations[turn - 1]}
            )
    with open(out_path, "w") as out:
        for line in lines:
            out.write(json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
