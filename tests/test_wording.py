"""Messages a user reads: rounded durations, the deadline named, the nearest provider id."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import pytest

from polythink import Client, Source
from polythink.errors import RateLimitedError, RequestTimeoutError
from polythink.providers import get_provider


def test_durations_in_messages_are_rounded() -> None:
    error = RateLimitedError(
        "openai answered HTTP 429", provider="openai", status_code=429, retry_after=59.997437589
    )
    assert str(error) == (
        "openai answered HTTP 429 (provider=openai, status=429, retry_after=60.0 s)"
    )


@contextlib.asynccontextmanager
async def silent_server() -> AsyncIterator[str]:
    """Accept calls and never answer them."""
    quiet = asyncio.Event()
    writers: list[asyncio.StreamWriter] = []

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        with contextlib.suppress(ConnectionError):
            await reader.read(65536)
            await quiet.wait()
        writer.close()

    server = await asyncio.start_server(connection, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    finally:
        quiet.set()
        for writer in writers:
            writer.close()
        server.close()
        await server.wait_closed()


@pytest.mark.anyio
@pytest.mark.parametrize("http", ["httpx", "aiohttp"])
@pytest.mark.parametrize("stream", [False, True])
async def test_deadline_exceeded_says_the_deadline(stream: bool, http: str) -> None:
    async with silent_server() as base_url:
        source = Source("openai", "gpt-4o", api_key="sk-test", base_url=base_url, max_retries=0)
        async with Client([source], http=http) as client:  # type: ignore[arg-type]
            prompt = [{"role": "user", "content": "hi"}]

            async def call() -> None:
                if stream:
                    [e async for e in client.stream(prompt, timeout=0.3)]
                else:
                    await client.complete(prompt, timeout=0.3)

            with pytest.raises(RequestTimeoutError) as caught:
                await call()
    assert caught.value.error_type == "deadline"
    assert caught.value.message == (
        "openai: deadline exceeded: no complete answer within the 0.3 s left of the call's "
        "timeout (Timeout.total or timeout=)"
    )


@pytest.mark.parametrize(
    ("wrong", "nearest"),
    [
        ("opneai", "openai"),
        ("Anthropic", "anthropic"),
        ("gemeni", "gemini"),
        ("deep-seek", "deepseek"),
    ],
)
def test_a_wrong_provider_id_suggests_the_nearest(wrong: str, nearest: str) -> None:
    with pytest.raises(ValueError, match=r"^unknown provider") as caught:
        Source(wrong, "some-model")
    assert str(caught.value).startswith(
        f"unknown provider {wrong!r} (did you mean {nearest!r}?); known providers: openai, "
    )


def test_no_suggestion_when_nothing_is_near() -> None:
    with pytest.raises(ValueError, match=r"^unknown provider 'zzzz'; known providers: openai,"):
        get_provider("zzzz")


@pytest.mark.anyio
async def test_nearest_mapping_is_logged_at_info_and_kept_on_the_response(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx
    import respx

    from polythink.middleware import reasoning as reasoning_layer
    from polythink.reasoning.observe import WarningThrottle

    monkeypatch.setattr(reasoning_layer, "_throttle", WarningThrottle())
    caplog.set_level(logging.DEBUG, logger="polythink")
    answer = {
        "id": "c1",
        "model": "gpt-5.1",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": {
            "prompt_tokens": 3,
            "completion_tokens": 9,
            "completion_tokens_details": {"reasoning_tokens": 7},
        },
    }
    mapped = (
        "model 'gpt-5.1' does not accept reasoning_effort='minimal' (accepted: none, low, "
        "medium, high); applied 'low' by effort_fallback='nearest'"
    )
    with respx.mock() as router:
        router.post("https://api.openai.com/v1/chat/completions").mock(
            return_value=httpx.Response(200, json=answer)
        )
        async with Client([Source("openai", "gpt-5.1", api_key="sk-test-000000000000")]) as c:
            response = await c.complete(
                [{"role": "user", "content": "hi"}], reasoning_effort="minimal"
            )
    assert response.warnings == [mapped]
    records = [
        (r.levelno, r.getMessage()) for r in caplog.records if r.name.startswith("polythink")
    ]
    assert records == [(logging.INFO, mapped)]
