"""Test support for the resilience layers: a fake clock, a client with injected retry timing,
mock HTTP, and the Chat Completions bodies the mocks answer with."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anyio.lowlevel
import httpx
import respx

from polythink import Client, Source, StreamEvent
from polythink.middleware.retry import RetryMiddleware, RetryPolicy

MESSAGES = [{"role": "user", "content": "hi"}]
BASE = "https://api.test/v1"
URL = f"{BASE}/chat/completions"


class FakeClock:
    """Monotonic seconds that only move when ``sleep`` is awaited; records every sleep."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await anyio.lowlevel.checkpoint()


def source(provider: str = "openai", model: str = "gpt-4o", **kwargs: Any) -> Source:
    """A source on the mock base URL (keyword overrides)."""
    fields: dict[str, Any] = {"api_key": "sk-test-0123456789", "base_url": BASE, **kwargs}
    return Source(provider, model, **fields)


def client_with(
    sources: Sequence[Source],
    *,
    clock: FakeClock,
    random: Callable[[], float] = lambda: 0.0,
    policy: RetryPolicy | None = None,
    **kwargs: Any,
) -> Client:
    """A client whose retry layers use ``clock`` (time and sleep) and ``random``."""
    client = Client(sources, **kwargs)
    client._retry = [
        RetryMiddleware(s, i, policy=policy, clock=clock, sleep=clock.sleep, random=random)
        for i, s in enumerate(client.sources)
    ]
    return client


def mock_http(router: respx.MockRouter) -> httpx.AsyncClient:
    """An httpx client answered by ``router``."""
    return httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))


def completion(text: str = "ok", model: str = "gpt-4o") -> dict[str, Any]:
    """A Chat Completions body answering ``text``."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
    }


def sse(*payloads: Any) -> bytes:
    """SSE bytes: one ``data:`` event per payload (a str is sent as is, e.g. ``[DONE]``)."""
    out = []
    for payload in payloads:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        out.append(f"data: {data}\n\n")
    return "".join(out).encode()


def chunk(content: str | None = None, finish: str | None = None) -> dict[str, Any]:
    """One Chat Completions stream chunk."""
    delta = {} if content is None else {"content": content}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


async def collect(events: AsyncIterator[StreamEvent], texts: list[str]) -> list[StreamEvent]:
    """Consume ``events``; append each text delta to ``texts`` as it arrives (so a test
    still sees them when the stream raises); return the events."""
    seen = []
    async for event in events:
        seen.append(event)
        if event.type == "text" and event.text is not None:
            texts.append(event.text)
    return seen
