"""Cases C05, C06, C07, C11 and C12 of CASES.md, through the real chat transport (respx)."""

from __future__ import annotations

import json
from contextlib import aclosing
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest
import respx

from polythink import Client, Source
from polythink.errors import (
    RateLimitedError,
    RequestTimeoutError,
    StreamInterruptedError,
    TransientError,
)
from polythink.middleware.base import Chain, compose
from polythink.middleware.cache import cache_key
from polythink.middleware.failover import Failover
from polythink.middleware.ratelimit import RateLimitMiddleware
from polythink.middleware.reasoning import ReasoningMiddleware
from polythink.providers import get_provider
from polythink.transports.openai_chat import OpenAIChatTransport
from polythink.types import StreamEvent
from tests.limits_cache_support import (
    API_KEY,
    CHAT_URL,
    DictStore,
    FakeClock,
    chat_json,
    chat_stream_chunks,
    sse,
)

pytestmark = pytest.mark.anyio

OLLAMA_URL = "http://127.0.0.1:11434/v1/chat/completions"
BACKUP_URL = "https://backup.example/v1/chat/completions"
HELLO = [{"role": "user", "content": "hello"}]


def streamed(body: bytes) -> httpx.Response:
    return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})


async def drain(events: Any) -> list[StreamEvent]:
    async with aclosing(events) as iterator:
        return [event async for event in iterator]


# --- C05: every parameter that reaches the provider is part of the key ---------------------


async def test_c05_a_provider_specific_parameter_is_part_of_the_key() -> None:
    source = Source("ollama", "llama3.2")
    store = DictStore()
    with respx.mock() as router:
        route = router.post(OLLAMA_URL)
        route.side_effect = [
            httpx.Response(200, json=chat_json("A")),
            httpx.Response(200, json=chat_json("B")),
        ]
        async with Client([source], cache=store) as client:
            c1 = client.request(HELLO, extra_body={"num_ctx": 2048})
            c2 = client.request(HELLO, extra_body={"num_ctx": 8192})
            assert cache_key(c1, [source]) != cache_key(c2, [source])
            first = await client.complete(HELLO, extra_body={"num_ctx": 2048})
            second = await client.complete(HELLO, extra_body={"num_ctx": 8192})
            again = await client.complete(HELLO, extra_body={"num_ctx": 2048})
    assert route.call_count == 2
    assert [json.loads(call.request.content)["num_ctx"] for call in route.calls] == [2048, 8192]
    assert (first.text, second.text, again.text) == ("A", "B", "A")
    assert (first.cache_hit, second.cache_hit, again.cache_hit) == (False, False, True)


async def test_c05_the_source_extra_body_is_part_of_the_key_too() -> None:
    small = Source("ollama", "llama3.2", extra_body={"num_ctx": 2048})
    large = Source("ollama", "llama3.2", extra_body={"num_ctx": 8192})
    store = DictStore()
    with respx.mock() as router:
        route = router.post(OLLAMA_URL)
        route.side_effect = [
            httpx.Response(200, json=chat_json("A")),
            httpx.Response(200, json=chat_json("B")),
        ]
        async with Client([small], cache=store) as client:
            assert (await client.complete(HELLO)).text == "A"
        async with Client([large], cache=store) as client:
            result = await client.complete(HELLO)
    assert result.text == "B"
    assert result.cache_hit is False
    assert route.call_count == 2


# --- C06: canonical JSON, key order never matters, array order does -----------------------


async def test_c06_reordered_keys_hit_and_swapped_messages_miss() -> None:
    source = Source("openai", "gpt-4o", api_key=API_KEY)
    store = DictStore()
    a_messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    b_messages = [{"content": "hi", "role": "user"}, {"content": "yo", "role": "assistant"}]
    with respx.mock() as router:
        route = router.post(CHAT_URL)
        route.side_effect = [
            httpx.Response(200, json=chat_json("first")),
            httpx.Response(200, json=chat_json("swapped")),
        ]
        async with Client([source], cache=store) as client:
            a = await client.complete(
                a_messages, temperature=0, extra_body={"metadata": {"x": 1, "y": {"p": 1, "q": 2}}}
            )
            b = await client.complete(
                b_messages, temperature=0, extra_body={"metadata": {"y": {"q": 2, "p": 1}, "x": 1}}
            )
            swapped = await client.complete(
                list(reversed(a_messages)),
                temperature=0,
                extra_body={"metadata": {"x": 1, "y": {"p": 1, "q": 2}}},
            )
    assert (a.cache_hit, b.cache_hit, swapped.cache_hit) == (False, True, False)
    assert (a.text, b.text, swapped.text) == ("first", "first", "swapped")
    assert route.call_count == 2


# --- C07: failures are never stored --------------------------------------------------------


async def test_c07_a_rate_limited_call_is_not_stored_and_the_next_reaches_the_provider() -> None:
    source = Source("openai", "gpt-4o", api_key=API_KEY, max_retries=0)
    store = DictStore()
    with respx.mock() as router:
        route = router.post(CHAT_URL)
        route.side_effect = [
            httpx.Response(429, json={"error": {"type": "rate_limit_exceeded", "message": "x"}}),
            httpx.Response(200, json=chat_json("the real answer")),
        ]
        async with Client([source], cache=store) as client:
            with pytest.raises(RateLimitedError):
                await client.complete(HELLO)
            assert store.data == {}
            result = await client.complete(HELLO)
    assert route.call_count == 2
    assert result.text == "the real answer"
    assert result.cache_hit is False
    assert len(store.data) == 1


async def test_c07_in_stream_errors_and_truncated_streams_are_not_stored() -> None:
    source = Source("openai", "gpt-4o", api_key=API_KEY, max_retries=0)
    store = DictStore()
    good = chat_stream_chunks(
        ["real ", "answer"], usage={"prompt_tokens": 5, "completion_tokens": 2}
    )
    in_band = [
        {"choices": [{"index": 0, "delta": {"content": "Sorry"}}]},
        {"error": {"type": "server_error", "message": "overloaded"}},
    ]
    truncated = good[:2]  # content, then the connection closes: no finish, no [DONE]
    with respx.mock() as router:
        route = router.post(CHAT_URL)
        route.side_effect = [
            streamed(sse(*in_band)),
            streamed(sse(*truncated)),
            streamed(sse(*good)),
        ]
        async with Client([source], cache=store) as client:
            with pytest.raises(StreamInterruptedError):
                await drain(client.stream(HELLO))
            with pytest.raises(StreamInterruptedError):
                await drain(client.stream(HELLO))
            assert store.data == {}
            events = await drain(client.stream(HELLO))
            replay = await drain(client.stream(HELLO))
    assert route.call_count == 3
    assert [e.text for e in events if e.type == "text"] == ["real ", "answer"]
    assert replay[:-1] == events[:-1]
    assert replay[-1].response is not None
    assert replay[-1].response.cache_hit is True


async def test_c07_a_stream_the_caller_abandons_is_not_stored() -> None:
    source = Source("openai", "gpt-4o", api_key=API_KEY, max_retries=0)
    store = DictStore()
    good = chat_stream_chunks(["a", "b"], usage={"prompt_tokens": 5, "completion_tokens": 2})
    with respx.mock() as router:
        route = router.post(CHAT_URL)
        route.side_effect = [streamed(sse(*good)), streamed(sse(*good))]
        async with Client([source], cache=store) as client:
            async with aclosing(client.stream(HELLO)) as events:
                async for event in events:
                    assert event.text == "a"
                    break
            assert store.data == {}
            await drain(client.stream(HELLO))
    assert route.call_count == 2
    assert len(store.data) == 1


# --- C11: streams count against TPM like non-streamed calls --------------------------------


def stack(
    source: Source, index: int, *, clock: FakeClock, http: httpx.AsyncClient
) -> tuple[Chain, RateLimitMiddleware]:
    """One source's stack as the client builds it, with an injected clock."""
    profile = get_provider(source.provider)
    limits = RateLimitMiddleware(source, index, profile, max_wait=0.0, clock=clock)
    transport = OpenAIChatTransport(
        source=source, index=index, profile=profile, client=http, api_key=API_KEY
    )
    return compose([limits, ReasoningMiddleware(source, index, profile)], transport), limits


@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "complete"])
async def test_c11_usage_is_counted_and_the_third_call_is_refused_or_routed(
    streaming: bool,
) -> None:
    clock = FakeClock()
    limited = Source("openai", "gpt-4o", api_key=API_KEY, tpm=100)
    backup = Source("openai", "gpt-4o", api_key=API_KEY, base_url="https://backup.example/v1")
    usage = {"prompt_tokens": 50, "completion_tokens": 10}
    with respx.mock() as router:
        primary = router.post(CHAT_URL)
        if streaming:
            primary.side_effect = lambda request: streamed(
                sse(*chat_stream_chunks(["ok"], usage=usage))
            )
        else:
            primary.side_effect = lambda request: httpx.Response(
                200, json=chat_json("ok", prompt_tokens=50, completion_tokens=10)
            )
        secondary = router.post(BACKUP_URL)
        if streaming:
            secondary.side_effect = lambda request: streamed(
                sse(*chat_stream_chunks(["from the backup"], usage=usage))
            )
        else:
            secondary.respond(200, json=chat_json("from the backup"))
        async with httpx.AsyncClient() as http:
            first_stack, layer = stack(limited, 0, clock=clock, http=http)
            second_stack, _ = stack(backup, 1, clock=clock, http=http)
            failover = Failover([first_stack, second_stack])
            assert layer.tokens is not None
            request = Client([limited]).request(HELLO, stream=streaming)
            counted = []
            for _ in range(2):
                if streaming:
                    await drain(first_stack.stream(request))
                else:
                    await first_stack.complete(request)
                counted.append(layer.tokens.capacity - layer.tokens.level(clock.now()))
            assert counted == [60.0, 120.0]
            call = (
                drain(first_stack.stream(request)) if streaming else first_stack.complete(request)
            )
            with pytest.raises(RateLimitedError) as refused:
                await call
            # 5 estimated tokens ("hello" + framing) on a bucket 20 in debt, at 100/60 per s.
            assert refused.value.retry_after == pytest.approx(15.0)
            if streaming:
                routed = (await drain(failover.stream(request)))[-1].response
                assert routed is not None
            else:
                routed = await failover.complete(request)
    assert routed.text == "from the backup"
    assert routed.source_index == 1
    assert primary.call_count == 2
    assert secondary.call_count == 1


async def test_c11_through_the_client_the_third_stream_goes_to_the_next_source() -> None:
    limited = Source("openai", "gpt-4o", api_key=API_KEY, tpm=100)
    backup = Source("openai", "gpt-4o", api_key=API_KEY, base_url="https://backup.example/v1")
    usage = {"prompt_tokens": 50, "completion_tokens": 10}
    with respx.mock() as router:
        primary = router.post(CHAT_URL)
        primary.side_effect = lambda request: streamed(
            sse(*chat_stream_chunks(["primary"], usage=usage))
        )
        secondary = router.post(BACKUP_URL)
        secondary.side_effect = lambda request: streamed(
            sse(*chat_stream_chunks(["backup"], usage=usage))
        )
        async with Client([limited, backup]) as client:
            answers = []
            for _ in range(3):
                events = await drain(client.stream(HELLO))
                done = events[-1].response
                assert done is not None
                answers.append((done.text, done.source_index))
    assert answers == [("primary", 0), ("primary", 0), ("backup", 1)]
    assert primary.call_count == 2


# --- C12: a concurrency slot is released on every exit path --------------------------------


def slots_of(client: Client) -> RateLimitMiddleware:
    return client._limits[0]


async def test_c12_every_exit_path_releases_the_slot() -> None:
    source = Source("openai", "gpt-4o", api_key=API_KEY, max_concurrency=2, max_retries=0)
    store = DictStore()

    async def provider(request: httpx.Request) -> httpx.Response:
        text = json.loads(request.content)["messages"][0]["content"]
        if text == "hang":
            await anyio.sleep(30)
        if text == "504":
            return httpx.Response(504, text="gateway timeout")
        if text == "stream":

            async def body() -> Any:
                yield sse({"choices": [{"index": 0, "delta": {"content": "partial"}}]})
                await anyio.sleep(30)

            return httpx.Response(
                200, content=body(), headers={"content-type": "text/event-stream"}
            )
        return httpx.Response(200, json=chat_json(f"answer to {text}"))

    with respx.mock(assert_all_called=False) as router:
        router.post(CHAT_URL).mock(side_effect=provider)
        async with Client([source], cache=store) as client:
            limits = slots_of(client)

            async def ask(text: str, **options: Any) -> Any:
                return await client.complete([{"role": "user", "content": text}], **options)

            # Timeout: two calls hang past their deadline.
            async with anyio.create_task_group() as tg:
                for _ in range(2):
                    tg.start_soon(_expect, RequestTimeoutError, ask, "hang", 0.05)
            assert limits.in_flight == 0
            assert (await ask("three")).text == "answer to three"

            # Provider error: two 504s.
            for _ in range(2):
                with pytest.raises(TransientError):
                    await ask("504", cache=False)
            assert limits.in_flight == 0
            assert (await ask("four")).text == "answer to four"

            # Client cancel in the middle of a stream.
            with anyio.move_on_after(0.1) as scope:
                async with aclosing(
                    client.stream([{"role": "user", "content": "stream"}])
                ) as events:
                    async for event in events:
                        assert event.text == "partial"
                        assert limits.in_flight == 1
            assert scope.cancelled_caught
            assert limits.in_flight == 0

            # Cache hit: answered without a slot while both slots are busy.
            async with anyio.create_task_group() as tg:
                for _ in range(2):
                    tg.start_soon(_expect, RequestTimeoutError, ask, "hang", 0.2)
                while limits.in_flight < 2:
                    await anyio.lowlevel.checkpoint()
                hit = await ask("three")
                assert hit.cache_hit is True
                assert limits.in_flight == 2
            assert limits.in_flight == 0

            # Rejection by another limiter: no slot frees up within the deadline.
            async with anyio.create_task_group() as tg:
                for _ in range(2):
                    tg.start_soon(_expect, RequestTimeoutError, ask, "hang", 0.2)
                while limits.in_flight < 2:
                    await anyio.lowlevel.checkpoint()
                with pytest.raises(RateLimitedError) as refused:
                    await ask("five", timeout=0.02)
                assert refused.value.error_type == "concurrency_limit"
            assert limits.in_flight == 0
            assert (await ask("six")).text == "answer to six"
            assert limits.in_flight == 0


async def test_c12_a_call_refused_by_the_rpm_bucket_gives_its_slot_back() -> None:
    source = Source("openai", "gpt-4o", api_key=API_KEY, max_concurrency=1, rpm=1)
    with respx.mock() as router:
        route = router.post(CHAT_URL).respond(200, json=chat_json("ok"))
        async with Client([source]) as client:
            await client.complete(HELLO, cache=False)
            with pytest.raises(RateLimitedError) as refused:
                await client.complete(HELLO, timeout=5.0)
            assert refused.value.error_type == "rpm_limit"
            assert slots_of(client).in_flight == 0
    assert route.call_count == 1


async def _expect(error: type[Exception], ask: Any, text: str, timeout: float) -> None:
    with pytest.raises(error):
        await ask(text, timeout=timeout, cache=False)
