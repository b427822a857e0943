"""A Claude Code–shaped session through ``polythink serve``: its headers, betas, system blocks
with cache_control, tools, adaptive thinking and effort, 20 turns of a tool loop, streamed and
not.

On an Anthropic source the provider receives, turn by turn, the bytes it receives when the
session talks to it directly, and the session receives the provider's bytes (a stream gains
only the gateway's closing comment line). On an OpenAI-compatible source (DeepSeek) every
turn is answered, and the reasoning of each tool-use turn goes back as DeepSeek requires.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from polythink.serve import RouteConfig
from polythink.simulator import Settings, Simulator
from tests.gateway_support import GatewayServer, Recorder, gateway_config

MODEL = "claude-sonnet-4-6"
BETAS = (
    "claude-code-20250219,interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14,"
    "context-management-2025-06-27"
)
HEADERS = {
    "anthropic-version": "2023-06-01",
    "anthropic-beta": BETAS,
    "x-api-key": "sk-ant-caller-0123456789abcdef",
    "user-agent": "claude-cli/2.1.280 (external, cli)",
    "x-app": "cli",
    "x-claude-code-session-id": "5b3e3b1c-7f4e-4f52-9a38-1d1f6a0c2e11",
    "x-stainless-retry-count": "0",
    "content-type": "application/json",
}
SYSTEM = [
    {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.280; cc_entrypoint=cli"},
    {
        "type": "text",
        "text": "You are Claude Code, Anthropic's official CLI for Claude.",
        "cache_control": {"type": "ephemeral"},
    },
]
TOOLS = [
    {
        "name": "Bash",
        "description": "Run a shell command.",
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
    {
        "name": "Read",
        "description": "Read a file.",
        "input_schema": {
            "type": "object",
            "properties": {"file_path": {"type": "string"}},
            "required": ["file_path"],
        },
        "cache_control": {"type": "ephemeral"},
    },
]
TURNS = 20


def _body(messages: list[Any], stream: bool, model: str) -> bytes:
    body = {
        "model": model,
        "max_tokens": 32000,
        "system": SYSTEM,
        "messages": messages,
        "tools": TOOLS,
        "metadata": {"user_id": "user_0f3c_account__session_5b3e3b1c"},
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "high"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "stream": stream,
    }
    # As the SDKs write JSON: compact, UTF-8 as it is.
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def _events(raw: bytes) -> Iterator[tuple[str, dict[str, Any]]]:
    for frame in raw.decode().split("\n\n"):
        kind, data = "", ""
        for line in frame.split("\n"):
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
        if kind and data:
            yield kind, json.loads(data)


def _message(raw: bytes, stream: bool) -> dict[str, Any]:
    """The assistant message of an answer, as a client assembles it."""
    if not stream:
        message: dict[str, Any] = json.loads(raw)
        return message
    blocks: dict[int, dict[str, Any]] = {}
    parts: dict[int, str] = {}
    stop = None
    for kind, event in _events(raw):
        if kind == "content_block_start":
            blocks[event["index"]] = dict(event["content_block"])
        elif kind == "content_block_delta":
            block, delta = blocks[event["index"]], event["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
            elif delta["type"] == "input_json_delta":
                parts[event["index"]] = parts.get(event["index"], "") + delta["partial_json"]
        elif kind == "message_delta":
            stop = event["delta"]["stop_reason"]
    for index, text in parts.items():
        blocks[index]["input"] = json.loads(text)
    return {"content": [blocks[i] for i in sorted(blocks)], "stop_reason": stop}


def _session(base: str, model: str) -> list[tuple[bytes, dict[str, Any]]]:
    """Run the session against ``base``; each turn's raw answer and its message."""
    messages: list[Any] = [{"role": "user", "content": "List the files, then read setup.py."}]
    answers = []
    with httpx.Client(timeout=30) as http:
        for turn in range(TURNS):
            stream = turn % 2 == 0
            answer = http.post(
                f"{base}/v1/messages?beta=true",
                content=_body(messages, stream, model),
                headers=HEADERS,
            )
            assert answer.status_code == 200, answer.text
            message = _message(answer.content, stream)
            answers.append((answer.content, message))
            messages.append({"role": "assistant", "content": message["content"]})
            uses = [b for b in message["content"] if b["type"] == "tool_use"]
            if uses:
                messages.append(
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": b["id"], "content": "ok"}
                            for b in uses
                        ],
                    }
                )
            else:
                messages.append({"role": "user", "content": f"Next step {turn}."})
    return answers


@pytest.fixture(scope="module")
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture(scope="module")
def sim(recorder: Recorder) -> Iterator[Simulator]:
    with Simulator(Settings(answer_words=4, tool_rounds=10, faults=recorder)) as simulator:
        yield simulator


def test_an_anthropic_source_sees_the_sessions_own_bytes(
    sim: Simulator, recorder: Recorder
) -> None:
    direct = _session(sim.base_url("anthropic").removesuffix("/v1"), MODEL)
    sent_directly = recorder.exchanges[:]
    recorder.exchanges.clear()
    with GatewayServer(gateway_config(sim)) as gateway:
        through = _session(gateway.root, MODEL)
    sent_through = recorder.exchanges[:]
    assert len(sent_directly) == len(sent_through) == TURNS
    for mine, theirs in zip(sent_directly, sent_through, strict=True):
        assert theirs.body == mine.body
        for name in ("anthropic-version", "anthropic-beta"):
            assert theirs.headers[name] == mine.headers[name]
        # The caller's credentials stay at the gateway: the source's own key goes.
        assert theirs.headers["x-api-key"] == "sk-sim-anthropic-0123456789"
    for turn, ((raw_direct, _), (raw_through, _)) in enumerate(zip(direct, through, strict=True)):
        if turn % 2:
            assert raw_through == raw_direct
        else:
            # Event by event, as the provider framed it; the gateway adds its comment line.
            frames = raw_through.split(b"\n\n")
            assert frames[-2].startswith(b": polythink {")
            assert [f for f in frames if not f.startswith(b":")] == raw_direct.split(b"\n\n")
    # The session used tools and thinking: a signed thinking block (bound to the conversation
    # before it) went back every turn after the first.
    stops = [message["stop_reason"] for _, message in through]
    assert stops.count("tool_use") == 10
    assert all(b'"signature":"sim2.' in e.body for e in sent_through[1:])


def test_an_openai_compatible_source_takes_the_session(sim: Simulator, recorder: Recorder) -> None:
    route = RouteConfig(name="claude-opus-4-7", sources=("deepseek/deepseek-v4-pro",))
    recorder.exchanges.clear()
    with GatewayServer(gateway_config(sim, routes=(route,))) as gateway:
        answers = _session(gateway.root, "claude-opus-4-7")
    sent = [json.loads(e.body) for e in recorder.exchanges]
    assert len(sent) == TURNS
    # Claude Code's adaptive thinking at high effort, in DeepSeek's own fields.
    assert all(body["thinking"] == {"type": "enabled"} for body in sent)
    assert all(body["reasoning_effort"] == "high" for body in sent)
    replayed = 0
    for turn, (_, message) in enumerate(answers[:-1]):
        if message["stop_reason"] != "tool_use":
            continue
        thought = "".join(b["thinking"] for b in message["content"] if b["type"] == "thinking")
        assert thought.startswith("Step 1:")
        later = [m for m in sent[turn + 1]["messages"] if m["role"] == "assistant"]
        assert later[-1]["reasoning_content"] == thought
        replayed += 1
    assert replayed == 10
