"""Test doubles for the rate-limit and cache layers: clocks, an inner handler, wire bodies."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel

from polythink.types import Message, RateLimit, Request, Response, StreamEvent, ToolCall, Usage

API_KEY = "sk-test-Zq9Vx7Lr2Kp4Mn6Bt8Wc"
CHAT_URL = "https://api.openai.com/v1/chat/completions"


class DictStore:
    """An in-memory store that counts what it is asked."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.gets = 0
        self.sets: list[tuple[str, float | None]] = []

    def get(self, key: str) -> bytes | None:
        self.gets += 1
        return self.data.get(key)

    def set(self, key: str, value: bytes, expire: float | None = None) -> None:
        self.sets.append((key, expire))
        self.data[key] = value

    def delete(self, key: str) -> None:
        self.data.pop(key, None)


class FakeClock:
    """A clock that only moves when someone sleeps on it; records every sleep."""

    def __init__(self, start: float = 1000.0) -> None:
        self.t = start
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds
        await anyio.lowlevel.checkpoint()


def response(
    text: str = "ok",
    *,
    usage: Usage | None = None,
    rate_limit: RateLimit | None = None,
    finish_reason: str = "stop",
    index: int = 0,
) -> Response:
    """A plain assistant response."""
    return Response(
        text=text,
        reasoning=None,
        tool_calls=[],
        finish_reason=finish_reason,
        usage=usage,
        model="gpt-4o",
        provider="openai",
        source_index=index,
        message=Message(role="assistant", content=text),
        rate_limit=rate_limit,
    )


Behaviour = Callable[[Request], Awaitable[Response]]


class FakeHandler:
    """An inner handler: ``complete`` runs ``behaviour``; ``stream`` yields ``events`` (or
    the events of the behaviour's response) and records what it was sent."""

    def __init__(self, behaviour: Behaviour | None = None) -> None:
        self.behaviour = behaviour
        self.requests: list[Request] = []
        self.active = 0
        self.peak = 0
        self.stream_events: list[StreamEvent] | None = None

    async def _run(self, request: Request) -> Response:
        self.requests.append(request)
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            if self.behaviour is None:
                await anyio.lowlevel.checkpoint()
                return response()
            return await self.behaviour(request)
        finally:
            self.active -= 1

    async def complete(self, request: Request) -> Response:
        return await self._run(request)

    async def stream(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
        if self.stream_events is not None:
            self.requests.append(request)
            for event in self.stream_events:
                await anyio.lowlevel.checkpoint()
                yield event
            return
        result = await self._run(request)
        yield StreamEvent("text", text=result.text)
        if result.usage is not None:
            yield StreamEvent("usage", usage=result.usage)
        yield StreamEvent("done", response=result)


def chat_json(text: str, *, prompt_tokens: int = 9, completion_tokens: int = 3) -> dict[str, Any]:
    """A Chat Completions response body."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
    }


def sse(*chunks: dict[str, Any] | str) -> bytes:
    """Server-sent events: one ``data:`` line per chunk (dicts as JSON)."""
    lines = [f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n" for c in chunks]
    return "".join(lines).encode()


def chat_stream_chunks(
    text_parts: list[str],
    *,
    reasoning_parts: tuple[str, ...] = (),
    tool_call: ToolCall | None = None,
    usage: dict[str, int] | None = None,
) -> list[dict[str, Any] | str]:
    """The chunks of a streamed Chat Completions answer, ending with usage and ``[DONE]``."""
    base = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "model": "deepseek-reasoner"}
    chunks: list[dict[str, Any] | str] = []
    for piece in reasoning_parts:
        delta = {"role": "assistant", "content": None, "reasoning_content": piece}
        chunks.append({**base, "choices": [{"index": 0, "delta": delta}]})
    for piece in text_parts:
        chunks.append({**base, "choices": [{"index": 0, "delta": {"content": piece}}]})
    finish = "stop"
    if tool_call is not None:
        call = {
            "index": 0,
            "id": tool_call.id,
            "type": "function",
            "function": {"name": tool_call.name, "arguments": tool_call.arguments},
        }
        chunks.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
        finish = "tool_calls"
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if usage is not None:
        chunks.append({**base, "choices": [], "usage": usage})
    chunks.append("[DONE]")
    return chunks
