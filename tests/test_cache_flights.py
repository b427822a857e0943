"""The cache coalesces identical calls in flight, and a hit carries only what is true of it."""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio
import httpx
import pytest
import respx

from polythink import Client, Source
from polythink.errors import TransientError
from polythink.middleware.base import Chain, compose
from polythink.middleware.cache import CacheMiddleware
from polythink.types import Message, Request, Response, StreamEvent, Usage
from tests.limits_cache_support import DictStore, FakeHandler, chat_json, response

pytestmark = pytest.mark.anyio

SOURCE = Source("openai", "gpt-4o", api_key="sk-unused-0000000000")


def ask(text: str = "hi", **fields: Any) -> Request:
    return Request(messages=(Message(role="user", content=text),), **fields)


def gated(inner_answer: Any = None) -> tuple[FakeHandler, anyio.Event, Chain, DictStore]:
    """A provider that answers only once ``release`` is set, behind a cache."""
    release = anyio.Event()

    async def answer(request: Request) -> Response:
        await release.wait()
        if inner_answer is not None:
            return inner_answer(request)
        text = request.messages[0].text()
        return response(f"answer to {text}", usage=Usage(input_tokens=3, output_tokens=2))

    inner = FakeHandler(answer)
    store = DictStore()
    chain = compose([CacheMiddleware(store, [SOURCE])], inner)
    return inner, release, chain, store


async def settle() -> None:
    for _ in range(20):
        await anyio.lowlevel.checkpoint()


async def until(condition: Any, seconds: float = 30.0) -> None:
    """Return once ``condition()`` holds (a loaded machine may take many turns of the loop
    to get a task there); fail after ``seconds``."""
    with anyio.fail_after(seconds):
        # The condition is state of the code under test, which sets no event to wait on.
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(0.001)


async def test_sixty_concurrent_calls_over_ten_prompts_make_ten_upstream_calls() -> None:
    inner, release, chain, store = gated()
    results: list[Response] = []

    async def call(i: int) -> None:
        results.append(await chain.complete(ask(f"prompt {i % 10}")))

    async with anyio.create_task_group() as tg:
        for i in range(60):
            tg.start_soon(call, i)
        await settle()
        release.set()
    assert len(inner.requests) == 10
    assert len(store.sets) == 10
    assert sorted(r.text for r in results) == sorted(
        f"answer to prompt {i % 10}" for i in range(60)
    )
    # One caller per prompt got the provider's answer; the 50 that waited got it as a hit.
    assert sum(not r.cache_hit for r in results) == 10
    assert sum(r.cache_hit for r in results) == 50
    assert all(r.usage == Usage(input_tokens=3, output_tokens=2) for r in results)


async def test_cancelling_the_first_caller_hands_the_call_to_a_waiting_one() -> None:
    inner, release, chain, _ = gated()
    got: list[Response] = []

    async def waiter() -> None:
        got.append(await chain.complete(ask()))

    leader_scope = anyio.CancelScope()

    async def leader() -> None:
        with leader_scope:
            await chain.complete(ask())

    async with anyio.create_task_group() as tg:
        tg.start_soon(leader)
        await until(lambda: len(inner.requests) == 1)
        tg.start_soon(waiter)
        await settle()
        leader_scope.cancel()
        await settle()
        release.set()
    # The cancelled leader's call was dropped; the waiter went upstream in its place.
    assert len(inner.requests) == 2
    assert [r.text for r in got] == ["answer to hi"]


async def test_cancelling_one_waiter_leaves_the_others_and_the_call() -> None:
    inner, release, chain, _ = gated()
    got: list[str] = []

    async def call() -> None:
        got.append((await chain.complete(ask())).text)

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await settle()
        with anyio.CancelScope() as doomed:
            async with anyio.create_task_group() as waiting:
                waiting.start_soon(call)
                await settle()
                doomed.cancel()
        tg.start_soon(call)
        await settle()
        release.set()
    assert len(inner.requests) == 1
    assert got == ["answer to hi", "answer to hi"]


async def test_an_error_of_the_call_reaches_every_waiter_once() -> None:
    def fail(request: Request) -> Response:
        raise TransientError("upstream down", provider="openai", status_code=503)

    inner, release, chain, store = gated(fail)
    errors: list[BaseException] = []

    async def call() -> None:
        try:
            await chain.complete(ask())
        except TransientError as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(call)
        await settle()
        release.set()
    assert len(inner.requests) == 1
    assert [str(e) for e in errors] == ["upstream down (provider=openai, status=503)"] * 5
    assert store.data == {}


async def test_streams_in_flight_are_coalesced_and_joiners_get_the_whole_replay() -> None:
    store = DictStore()
    inner = FakeHandler()
    done = response("abc", usage=Usage(input_tokens=3, output_tokens=3))
    inner.stream_events = [
        StreamEvent("reasoning", text="think"),
        StreamEvent("text", text="a"),
        StreamEvent("text", text="bc"),
        StreamEvent("usage", usage=done.usage),
        StreamEvent("done", response=done),
    ]
    chain = compose([CacheMiddleware(store, [SOURCE])], inner)
    seen: dict[str, list[StreamEvent]] = {}
    first_event = anyio.Event()

    async def first() -> None:
        events = []
        async for event in chain.stream(ask(stream=True)):
            events.append(event)
            if len(events) == 2:
                first_event.set()
                await settle()  # the joiner arrives mid-stream
        seen["first"] = events

    async def joiner() -> None:
        await first_event.wait()
        seen["joiner"] = [e async for e in chain.stream(ask(stream=True))]

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        tg.start_soon(joiner)
    assert len(inner.requests) == 1
    assert [(e.type, e.text) for e in seen["joiner"]] == [
        (e.type, e.text) for e in inner.stream_events
    ]
    assert seen["joiner"][3].usage == done.usage
    last = seen["joiner"][-1].response
    assert last is not None
    assert last.cache_hit is True
    assert last.text == "abc"
    assert seen["first"][-1].response is done


async def test_a_stream_closed_early_by_the_first_caller_is_redone_for_the_waiter() -> None:
    inner = FakeHandler()
    inner.stream_events = [
        StreamEvent("text", text="a"),
        StreamEvent("text", text="b"),
        StreamEvent("done", response=response("ab")),
    ]
    chain = compose([CacheMiddleware(DictStore(), [SOURCE])], inner)
    joined = anyio.Event()
    seen: list[str | None] = []

    async def first() -> None:
        events = chain.stream(ask(stream=True))
        await events.__anext__()
        joined.set()
        await settle()
        await events.aclose()

    async def joiner() -> None:
        await joined.wait()
        seen.extend(e.text for e in [e async for e in chain.stream(ask(stream=True))])

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        tg.start_soon(joiner)
    assert len(inner.requests) == 2
    assert seen == ["a", "b", None]


async def test_a_hit_drops_failover_notes_but_keeps_what_the_answer_implies() -> None:
    mapped = (
        "model 'gpt-5.1' does not accept reasoning_effort='minimal' (accepted: none, low, "
        "medium, high); applied 'low' by effort_fallback='nearest'"
    )
    failover = (
        "failover: source 0 (openai gpt-4o) failed (TransientError, HTTP 503, server_error); "
        "tried the next source"
    )
    answered = dataclasses.replace(response("ok", index=1), warnings=[mapped, failover])

    async def answer(request: Request) -> Response:
        return answered

    inner = FakeHandler(answer)
    chain = compose([CacheMiddleware(DictStore(), [SOURCE])], inner)
    fresh = await chain.complete(ask())
    hit = await chain.complete(ask())
    assert fresh.warnings == [mapped, failover]
    assert hit.cache_hit is True
    assert hit.warnings == [mapped]
    assert hit.source_index == 1
    assert hit.rate_limit is None


async def test_through_the_client_a_replayed_hit_has_no_failover_warning() -> None:
    sources = [
        Source("openai", "gpt-4o", api_key="sk-unused-0000000000", max_retries=0),
        Source("openai", "gpt-4o-mini", api_key="sk-unused-0000000000", max_retries=0),
    ]
    with respx.mock() as router:
        router.post("https://api.openai.com/v1/chat/completions").mock(
            side_effect=[
                httpx.Response(503, json={"error": {"message": "busy", "type": "server_error"}}),
                httpx.Response(200, json=chat_json("ok")),
            ]
        )
        async with Client(sources, cache=DictStore(), http="httpx") as client:
            fresh = await client.complete([{"role": "user", "content": "hi"}])
            hit = await client.complete([{"role": "user", "content": "hi"}])
    assert fresh.warnings == [
        "failover: source 0 (openai gpt-4o) failed (TransientError, HTTP 503, server_error); "
        "tried the next source"
    ]
    assert hit.cache_hit is True
    assert hit.warnings == []
