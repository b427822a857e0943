"""The response cache: the key, what is stored, replay, bypass, refresh, TTL, the disk store."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import os
import stat
from collections.abc import Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from polythink import Client, InvalidInputError, Source
from polythink.errors import RequestRejectedError, StreamInterruptedError, TransientError
from polythink.middleware.base import Chain, compose
from polythink.middleware.cache import (
    CacheMiddleware,
    DiskStore,
    cache_key,
    cache_store,
    canonical_request,
    canonical_scope,
    default_cache_dir,
)
from polythink.simulator import Simulator
from polythink.types import (
    Effort,
    Message,
    RateLimit,
    Request,
    Response,
    StreamEvent,
    ThinkingObservation,
    Tool,
    ToolCall,
    Usage,
)
from tests.limits_cache_support import (
    API_KEY,
    CHAT_URL,
    DictStore,
    FakeHandler,
    chat_json,
    chat_stream_chunks,
    response,
    sse,
)

pytestmark = pytest.mark.anyio

SOURCE = Source("openai", "gpt-4o", api_key="sk-unused-0000000000")


def ask(text: str = "hi", **fields: Any) -> Request:
    return Request(messages=(Message(role="user", content=text),), **fields)


def layered(
    store: Any = None,
    *,
    handler: FakeHandler | None = None,
    ttl: float | None = None,
    clock: Callable[[], float] | None = None,
) -> tuple[CacheMiddleware, FakeHandler, Chain]:
    options: dict[str, Any] = {"ttl": ttl}
    if clock is not None:
        options["clock"] = clock
    layer = CacheMiddleware(store if store is not None else DictStore(), [SOURCE], **options)
    inner = handler or FakeHandler()
    return layer, inner, compose([layer], inner)


def counting(*texts: str) -> FakeHandler:
    answers = list(texts)

    async def answer(request: Request) -> Response:
        return response(answers.pop(0), usage=Usage(input_tokens=4, output_tokens=2))

    return FakeHandler(answer)


# --- the key -------------------------------------------------------------------------------


def test_the_canonical_form_and_the_key_are_exactly_as_documented() -> None:
    request = ask("hi", temperature=0, max_tokens=5)
    expected_request = (
        '{"extra_body":null,"max_tokens":5,"messages":[{"content":"hi","name":null,'
        '"reasoning":null,"reasoning_format":null,"reasoning_items":[],"role":"user",'
        '"tool_call_id":null,"tool_calls":[]}],"reasoning_effort":null,"stop":null,'
        '"stream":false,"temperature":0.0,"tool_choice":null,"tools":[],"top_p":null}'
    )
    # The credentials: the first 16 hex digits of the SHA-256 of the key.
    credentials = hashlib.sha256(b"sk-unused-0000000000").hexdigest()[:16]
    expected_scope = (
        '[{"base_url":"https://api.openai.com/v1","credentials":"' + credentials + '",'
        '"drop_params":false,"effort_fallback":"nearest","extra_body":null,"model":"gpt-4o",'
        '"provider":"openai"}]'
    )
    assert canonical_request(request) == expected_request
    assert canonical_scope([SOURCE]) == expected_scope
    # In the key, reasoning_effort is the effective tier of each source.
    keyed_request = expected_request.replace('"reasoning_effort":null', '"reasoning_effort":[null]')
    assert canonical_request(request, [None]) == keyed_request
    digest = hashlib.sha256(
        b"polythink-cache-v3\n" + expected_scope.encode() + b"\n" + keyed_request.encode()
    ).hexdigest()
    assert cache_key(request, [SOURCE]) == digest


def test_reordered_json_keys_share_a_key_at_every_depth() -> None:
    a = ask(
        extra_body={"num_ctx": 2048, "options": {"x": 1, "y": [{"p": 1, "q": 2}]}},
        tool_choice={"type": "function", "function": {"name": "f"}},
        tools=(Tool(name="f", parameters={"type": "object", "properties": {"a": {}, "b": {}}}),),
    )
    b = ask(
        extra_body={"options": {"y": [{"q": 2, "p": 1}], "x": 1}, "num_ctx": 2048},
        tool_choice={"function": {"name": "f"}, "type": "function"},
        tools=(Tool(name="f", parameters={"properties": {"b": {}, "a": {}}, "type": "object"}),),
    )
    assert cache_key(a, [SOURCE]) == cache_key(b, [SOURCE])


def test_array_order_is_significant() -> None:
    one, two = Message(role="user", content="one"), Message(role="assistant", content="two")
    assert cache_key(Request(messages=(one, two)), [SOURCE]) != cache_key(
        Request(messages=(two, one)), [SOURCE]
    )
    assert cache_key(ask(stop=("a", "b")), [SOURCE]) != cache_key(ask(stop=("b", "a")), [SOURCE])
    nested_a = ask(extra_body={"list": [1, 2]})
    nested_b = ask(extra_body={"list": [2, 1]})
    assert cache_key(nested_a, [SOURCE]) != cache_key(nested_b, [SOURCE])


def test_zero_and_zero_point_zero_temperature_share_a_key() -> None:
    assert cache_key(ask(temperature=0), [SOURCE]) == cache_key(ask(temperature=0.0), [SOURCE])
    assert cache_key(ask(top_p=1), [SOURCE]) == cache_key(ask(top_p=1.0), [SOURCE])


BASE = ask(
    "hello",
    max_tokens=100,
    temperature=0.5,
    top_p=0.9,
    stop=("END",),
    tools=(Tool(name="f", description="d"),),
    tool_choice="auto",
    extra_body={"num_ctx": 2048},
    reasoning_effort=Effort.HIGH,
)
BASE_SOURCE = Source(
    "ollama",
    "llama3.2",
    base_url="http://localhost:11434/v1",
    reasoning_effort="low",
    extra_body={"keep_alive": "5m"},
)

REQUEST_CHANGES: dict[str, Callable[[Request], Request]] = {
    "message text": lambda r: r.with_(messages=(Message(role="user", content="hello!"),)),
    "message role": lambda r: r.with_(messages=(Message(role="system", content="hello"),)),
    "message name": lambda r: r.with_(
        messages=(Message(role="user", content="hello", name="ann"),)
    ),
    "tool_call_id": lambda r: r.with_(
        messages=(Message(role="tool", content="hello", tool_call_id="c1"),)
    ),
    "tool_calls": lambda r: r.with_(
        messages=(
            Message(role="assistant", content="hello", tool_calls=(ToolCall(id="c", name="f"),)),
        )
    ),
    "reasoning sent back": lambda r: r.with_(
        messages=(Message(role="assistant", content="hello", reasoning="because"),)
    ),
    "reasoning items": lambda r: r.with_(
        messages=(
            Message(
                role="assistant",
                content="hello",
                reasoning_items=({"type": "thinking", "signature": "s"},),
                reasoning_format="anthropic",
            ),
        )
    ),
    "max_tokens": lambda r: r.with_(max_tokens=101),
    "temperature": lambda r: r.with_(temperature=0.6),
    "top_p": lambda r: r.with_(top_p=0.95),
    "stop": lambda r: r.with_(stop=("END", "STOP")),
    "tool description": lambda r: r.with_(tools=(Tool(name="f", description="e"),)),
    "tool parameters": lambda r: r.with_(
        tools=(Tool(name="f", description="d", parameters={"type": "object", "required": []}),)
    ),
    "tool strict": lambda r: r.with_(tools=(Tool(name="f", description="d", strict=True),)),
    "tool_choice": lambda r: r.with_(tool_choice="required"),
    "extra_body value (num_ctx, case C05)": lambda r: r.with_(extra_body={"num_ctx": 8192}),
    "extra_body key": lambda r: r.with_(extra_body={"num_ctx": 2048, "seed": 1}),
    "requested tier": lambda r: r.with_(reasoning_effort=Effort.MEDIUM),
    "requested tier unset": lambda r: r.with_(reasoning_effort=None),
    "stream": lambda r: r.with_(stream=True),
}

SOURCE_CHANGES: dict[str, Callable[[Source], list[Source]]] = {
    "provider": lambda s: [dataclasses.replace(s, provider="vllm")],
    "model": lambda s: [dataclasses.replace(s, model="llama3.3")],
    "base URL": lambda s: [dataclasses.replace(s, base_url="http://gpu-2:11434/v1")],
    "source fallback": lambda s: [dataclasses.replace(s, effort_fallback="error")],
    "source drop_params": lambda s: [dataclasses.replace(s, drop_params=True)],
    "source extra_body": lambda s: [dataclasses.replace(s, extra_body={"keep_alive": "1m"})],
    "another source": lambda s: [s, Source("openai", "gpt-4o", api_key="sk-unused-00000000")],
}


@pytest.mark.parametrize("change", REQUEST_CHANGES.values(), ids=REQUEST_CHANGES.keys())
def test_every_request_field_that_reaches_the_provider_changes_the_key(
    change: Callable[[Request], Request],
) -> None:
    assert cache_key(change(BASE), [BASE_SOURCE]) != cache_key(BASE, [BASE_SOURCE])


@pytest.mark.parametrize("change", SOURCE_CHANGES.values(), ids=SOURCE_CHANGES.keys())
def test_every_source_identity_changes_the_key(change: Callable[[Source], list[Source]]) -> None:
    assert cache_key(BASE, change(BASE_SOURCE)) != cache_key(BASE, [BASE_SOURCE])


def test_the_key_records_the_effective_tier_whatever_its_origin() -> None:
    high = dataclasses.replace(BASE_SOURCE, reasoning_effort=Effort.HIGH)
    unset = BASE.with_(reasoning_effort=None)
    # Per call "high" on a source configured "high" is the same call as leaving it unset.
    assert cache_key(BASE, [high]) == cache_key(unset, [high])
    assert canonical_request(unset, [Effort.HIGH]) == canonical_request(BASE, [Effort.HIGH])
    # The source's tier counts when the call sets none, and only then.
    medium = dataclasses.replace(BASE_SOURCE, reasoning_effort=Effort.MEDIUM)
    assert cache_key(unset, [medium]) != cache_key(unset, [high])
    assert cache_key(BASE, [medium]) == cache_key(BASE, [high])
    # Per source, in order: a second source's own tier is part of the key.
    other = Source("openai", "gpt-5.5", api_key="sk-unused-00000000")
    assert cache_key(unset, [high, other]) != cache_key(
        unset, [high, dataclasses.replace(other, reasoning_effort="low")]
    )
    assert cache_key(BASE, [high, other]) == cache_key(
        BASE, [high, dataclasses.replace(other, reasoning_effort="low")]
    )


NOT_IN_KEY: dict[str, Callable[[Source], Source]] = {
    "tracing headers": lambda s: dataclasses.replace(
        s, headers={"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    ),
    "timeout": lambda s: dataclasses.replace(s, timeout=5.0),
    "limits": lambda s: dataclasses.replace(s, rpm=10, tpm=1000, max_concurrency=2),
    "retries": lambda s: dataclasses.replace(s, max_retries=0),
}


@pytest.mark.parametrize("change", NOT_IN_KEY.values(), ids=NOT_IN_KEY.keys())
def test_tracing_headers_timeouts_and_limits_stay_out_of_the_key(
    change: Callable[[Source], Source],
) -> None:
    assert cache_key(BASE, [change(BASE_SOURCE)]) == cache_key(BASE, [BASE_SOURCE])


def test_a_header_a_source_sends_is_part_of_the_key_and_a_credential_only_as_a_fingerprint() -> (
    None
):
    beta = dataclasses.replace(BASE_SOURCE, headers={"Anthropic-Beta": "context-1m-2025-08-07"})
    assert cache_key(BASE, [beta]) != cache_key(BASE, [BASE_SOURCE])
    assert '"headers":{"anthropic-beta":"context-1m-2025-08-07"}' in canonical_scope([beta])
    # Names compare in any case, as on the wire.
    lower = dataclasses.replace(BASE_SOURCE, headers={"anthropic-beta": "context-1m-2025-08-07"})
    assert cache_key(BASE, [lower]) == cache_key(BASE, [beta])
    # Another key, or another credential header value: another entry, the value never shown.
    other_key = dataclasses.replace(BASE_SOURCE, api_key="sk-other-1111111111111")
    assert cache_key(BASE, [other_key]) != cache_key(BASE, [BASE_SOURCE])
    org = dataclasses.replace(BASE_SOURCE, headers={"X-Org-Token": "org-token-2222222222"})
    assert cache_key(BASE, [org]) != cache_key(BASE, [BASE_SOURCE])
    assert "org-token" not in canonical_scope([org])
    assert "X-Org-Token" not in canonical_scope([org])
    assert "sk-unused" not in canonical_scope([org])


def test_a_calls_extra_headers_are_part_of_the_key_but_credentials_and_tracing() -> None:
    key = cache_key(BASE, [BASE_SOURCE])
    beta = BASE.with_(extra_headers={"OpenAI-Beta": "responses=v2"})
    assert cache_key(beta, [BASE_SOURCE]) != key
    canonical = canonical_request(beta, [BASE_SOURCE.effort])
    assert (
        '"reasoning_effort":["high"],"request_headers":{"openai-beta":"responses=v2"},'
        '"stop":["END"]'
    ) in canonical
    # The piecewise digest is the hash of that canonical form.
    scope = canonical_scope([BASE_SOURCE]).encode()
    whole = b"polythink-cache-v3\n" + scope + b"\n" + canonical.encode()
    assert cache_key(beta, [BASE_SOURCE]) == hashlib.sha256(whole).hexdigest()
    unkeyed = {
        "Authorization": "Bearer sk-call-3333333333",
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "X-Request-Id": "req-1",
    }
    assert cache_key(BASE.with_(extra_headers=unkeyed), [BASE_SOURCE]) == key
    assert canonical_request(BASE.with_(extra_headers=unkeyed)) == canonical_request(BASE)


def test_request_timeout_and_cache_mode_stay_out_of_the_key() -> None:
    key = cache_key(BASE, [BASE_SOURCE])
    assert cache_key(BASE.with_(timeout=3.0), [BASE_SOURCE]) == key
    assert cache_key(BASE.with_(cache="refresh"), [BASE_SOURCE]) == key


# --- hits, misses and what is stored -------------------------------------------------------


async def test_a_repeated_call_is_answered_from_the_cache() -> None:
    store = DictStore()
    _, inner, chain = layered(store, handler=counting("A"))
    first = await chain.complete(ask())
    second = await chain.complete(ask())
    assert len(inner.requests) == 1
    assert first.cache_hit is False
    assert second.cache_hit is True
    assert dataclasses.replace(second, cache_hit=False) == first
    assert len(store.data) == 1


async def test_a_hit_keeps_every_field_but_the_rate_limit() -> None:
    original = Response(
        text="answer",
        reasoning="thought",
        tool_calls=[ToolCall(id="c1", name="f", arguments='{"a":1}')],
        finish_reason="tool_calls",
        usage=Usage(10, 5, 3, 2, None),
        model="claude-sonnet-4-5-20250929",
        provider="anthropic",
        source_index=0,
        message=Message(
            role="assistant",
            content=[{"type": "text", "text": "answer"}],
            tool_calls=(ToolCall(id="c1", name="f", arguments='{"a":1}'),),
            reasoning="thought",
            reasoning_items=({"type": "thinking", "thinking": "thought", "signature": "sig"},),
            reasoning_format="anthropic",
        ),
        requested_effort=Effort.XHIGH,
        applied_effort=Effort.HIGH,
        thinking=ThinkingObservation.OBSERVED,
        warnings=["mapped xhigh to high"],
        output_limited=False,
        id="msg_1",
        rate_limit=RateLimit(requests_remaining=3),
    )

    async def answer(request: Request) -> Response:
        return original

    _, _, chain = layered(handler=FakeHandler(answer))
    await chain.complete(ask())
    hit = await chain.complete(ask())
    assert hit == dataclasses.replace(original, cache_hit=True, rate_limit=None)


async def test_failures_are_never_stored() -> None:
    store = DictStore()
    errors: list[Exception] = [
        TransientError("upstream 503", status_code=503),
        RequestRejectedError("bad", status_code=400),
    ]

    async def answer(request: Request) -> Response:
        if errors:
            raise errors.pop(0)
        if len(inner.requests) == 3:
            return response("partial", finish_reason="error")
        return response("real")

    inner = FakeHandler(answer)
    _, _, chain = layered(store, handler=inner)
    with pytest.raises(TransientError):
        await chain.complete(ask())
    with pytest.raises(RequestRejectedError):
        await chain.complete(ask())
    assert (await chain.complete(ask())).finish_reason == "error"
    assert store.data == {}
    result = await chain.complete(ask())
    assert result.text == "real"
    assert result.cache_hit is False
    assert len(store.data) == 1
    assert (await chain.complete(ask())).cache_hit is True
    assert len(inner.requests) == 4


@pytest.mark.parametrize("finish", ["error", "weird_failure", "end_turn", ""])
async def test_only_the_finish_reasons_of_a_whole_answer_are_stored(finish: str) -> None:
    # A transport of one's own may set any string; only polythink's four ends of an answer
    # that ended as the provider meant it are kept.
    store = DictStore()
    answers = [response("odd", finish_reason=finish), response("real")]

    async def answer(request: Request) -> Response:
        return answers.pop(0)

    inner = FakeHandler(answer)
    _, _, chain = layered(store, handler=inner)
    first = await chain.complete(ask())
    assert (first.text, first.finish_reason, store.data) == ("odd", finish, {})
    assert [(r.text, r.cache_hit) for r in [await chain.complete(ask()) for _ in range(2)]] == [
        ("real", False),
        ("real", True),
    ]
    assert len(inner.requests) == 2


STREAM = [
    StreamEvent("reasoning", text="Add 2 "),
    StreamEvent("reasoning", text="and 2."),
    StreamEvent("text", text="4"),
    StreamEvent("text", text="."),
    StreamEvent("tool_call", tool_call=ToolCall(id="call_1", name="check", arguments='{"n":4}')),
    StreamEvent("usage", usage=Usage(input_tokens=12, output_tokens=7, reasoning_tokens=4)),
]
STREAM_RESPONSE = Response(
    text="4.",
    reasoning="Add 2 and 2.",
    tool_calls=[ToolCall(id="call_1", name="check", arguments='{"n":4}')],
    finish_reason="tool_calls",
    usage=Usage(input_tokens=12, output_tokens=7, reasoning_tokens=4),
    model="deepseek-reasoner",
    provider="deepseek",
    source_index=0,
    message=Message(
        role="assistant",
        content="4.",
        tool_calls=(ToolCall(id="call_1", name="check", arguments='{"n":4}'),),
        reasoning="Add 2 and 2.",
    ),
    requested_effort=Effort.HIGH,
    applied_effort=Effort.HIGH,
    thinking=ThinkingObservation.OBSERVED,
)


async def collect(chain: Chain, request: Request) -> list[StreamEvent]:
    async with aclosing(chain.stream(request)) as events:
        return [event async for event in events]


async def test_a_streaming_hit_replays_a_stream_equal_to_the_original() -> None:
    _, inner, chain = layered()
    inner.stream_events = [*STREAM, StreamEvent("done", response=STREAM_RESPONSE)]
    original = await collect(chain, ask(stream=True))
    replayed = await collect(chain, ask(stream=True))
    assert len(inner.requests) == 1
    assert original == inner.stream_events
    assert replayed[:-1] == STREAM
    done = replayed[-1]
    assert done.type == "done"
    assert done.response == dataclasses.replace(STREAM_RESPONSE, cache_hit=True)


async def test_a_stream_is_stored_even_when_the_caller_stops_reading_at_done() -> None:
    store = DictStore()
    _, inner, chain = layered(store)
    inner.stream_events = [*STREAM, StreamEvent("done", response=STREAM_RESPONSE)]
    async with aclosing(chain.stream(ask(stream=True))) as events:
        async for event in events:
            if event.type == "done":
                break
    assert len(store.data) == 1


async def test_broken_truncated_or_abandoned_streams_are_never_stored() -> None:
    store = DictStore()
    _, inner, chain = layered(store)
    partial = dataclasses.replace(STREAM_RESPONSE, finish_reason="error")

    inner.stream_events = STREAM  # ends without a done event
    assert [e.type for e in await collect(chain, ask(stream=True))][-1] == "usage"
    inner.stream_events = [*STREAM, StreamEvent("done", response=partial)]
    await collect(chain, ask(stream=True))
    inner.stream_events = [*STREAM, StreamEvent("done", response=STREAM_RESPONSE)]
    async with aclosing(chain.stream(ask(stream=True))) as events:
        async for _ in events:
            break

    async def broken(request: Request) -> Response:
        raise StreamInterruptedError("cut", partial=partial)

    inner.stream_events = None
    inner.behaviour = broken
    with pytest.raises(StreamInterruptedError):
        await collect(chain, ask(stream=True))
    assert store.data == {}
    assert len(inner.requests) == 4


async def test_a_stream_and_a_complete_call_do_not_share_an_entry() -> None:
    _, inner, chain = layered(handler=counting("complete", "streamed"))
    await chain.complete(ask())
    events = await collect(chain, ask(stream=True))
    assert events[-1].response is not None
    assert events[-1].response.text == "streamed"
    assert len(inner.requests) == 2


async def test_bypass_neither_reads_nor_writes() -> None:
    store = DictStore()
    _, inner, chain = layered(store, handler=counting("A", "B", "C"))
    await chain.complete(ask())
    assert (await chain.complete(ask(cache=False))).text == "B"
    assert (await collect(chain, ask(stream=True, cache=False)))[-1].type == "done"
    assert store.gets == 1
    assert len(store.sets) == 1
    assert len(inner.requests) == 3


async def test_refresh_calls_the_provider_and_overwrites_the_entry() -> None:
    store = DictStore()
    _, inner, chain = layered(store, handler=counting("old", "new"))
    await chain.complete(ask())
    refreshed = await chain.complete(ask(cache="refresh"))
    assert refreshed.text == "new"
    assert refreshed.cache_hit is False
    assert store.gets == 1
    hit = await chain.complete(ask())
    assert hit.text == "new"
    assert hit.cache_hit is True
    assert len(inner.requests) == 2


async def test_refresh_works_for_streams_too() -> None:
    _, inner, chain = layered(handler=counting("old", "new"))
    await collect(chain, ask(stream=True))
    await collect(chain, ask(stream=True, cache="refresh"))
    replay = await collect(chain, ask(stream=True))
    assert replay[0] == StreamEvent("text", text="new")
    assert len(inner.requests) == 2


async def test_entries_expire_after_the_ttl_on_the_injected_clock() -> None:
    now = [1_700_000_000.0]
    store = DictStore()
    _, inner, chain = layered(store, handler=counting("A", "B"), ttl=60.0, clock=lambda: now[0])
    await chain.complete(ask())
    now[0] += 60.0
    assert (await chain.complete(ask())).cache_hit is True
    now[0] += 0.5
    late = await chain.complete(ask())
    assert late.cache_hit is False
    assert late.text == "B"
    assert [expire for _, expire in store.sets] == [60.0, 60.0]
    assert len(inner.requests) == 2


def test_a_non_positive_ttl_is_refused() -> None:
    with pytest.raises(ValueError, match="ttl"):
        CacheMiddleware(DictStore(), [SOURCE], ttl=0)
    with pytest.raises(ValueError, match="ttl"):
        DiskStore("/nonexistent", ttl=-1.0)
    with pytest.raises(ValueError, match="size_limit"):
        DiskStore("/nonexistent", size_limit=0)


async def test_a_request_that_cannot_be_keyed_is_sent_uncached_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = DictStore()
    layer, _inner, chain = layered(store, handler=counting("A", "B"))
    odd = ask(extra_body={"tags": {"a", "b"}})
    with caplog.at_level(logging.DEBUG, logger="polythink.cache"):
        assert (await chain.complete(odd)).text == "A"
        assert (await chain.complete(odd)).text == "B"
    assert layer.key(odd) is None
    assert store.data == {}
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "cannot be part of a cache key" in warnings[0].getMessage()


def test_a_source_extra_body_that_cannot_be_keyed_fails_at_build_time() -> None:
    with pytest.raises(ValueError, match=r"Source.extra_body\['x'\] is of type set"):
        Source("openai", "gpt-4o", api_key="sk-unused-0000000000", extra_body={"x": {1, 2}})
    # NaN would reach the wire as null: the source refuses it when built.
    with pytest.raises(ValueError, match=r"Source.extra_body\['x'\] is nan"):
        Source("openai", "gpt-4o", api_key="sk-unused-0000000000", extra_body={"x": math.nan})


# --- degraded stores -----------------------------------------------------------------------


class BrokenStore(DictStore):
    def get(self, key: str) -> bytes | None:
        raise OSError("disk I/O error")

    def set(self, key: str, value: bytes, expire: float | None = None) -> None:
        raise OSError("disk I/O error")


async def test_an_unreadable_store_degrades_to_misses_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, inner, chain = layered(BrokenStore(), handler=counting("A", "B", "C"))
    with caplog.at_level(logging.WARNING, logger="polythink.cache"):
        texts = [(await chain.complete(ask())).text for _ in range(3)]
    assert texts == ["A", "B", "C"]
    assert len([r for r in caplog.records if r.name == "polythink.cache"]) == 1
    assert len(inner.requests) == 3


async def test_a_corrupt_entry_is_a_miss_with_one_warning_and_is_replaced(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = DictStore()
    layer, inner, chain = layered(store, handler=counting("fresh"))
    key = layer.key(ask())
    assert key is not None
    store.data[key] = b"\x00not json"
    with caplog.at_level(logging.WARNING, logger="polythink.cache"):
        miss = await chain.complete(ask())
        hit = await chain.complete(ask())
    assert miss.cache_hit is False
    assert miss.text == "fresh"
    assert hit.cache_hit is True
    assert len(caplog.records) == 1
    assert "unreadable" in caplog.records[0].getMessage()
    assert len(inner.requests) == 1


async def test_an_entry_of_the_wrong_shape_is_a_miss() -> None:
    store = DictStore()
    layer, inner, chain = layered(store, handler=counting("fresh"))
    key = layer.key(ask())
    assert key is not None
    store.data[key] = b'{"v":1,"at":0,"response":{"text":"only"}}'
    assert (await chain.complete(ask())).text == "fresh"
    assert len(inner.requests) == 1


async def test_a_corrupt_database_file_degrades_to_misses_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "cache"
    directory.mkdir()
    (directory / "cache.db").write_bytes(b"this is not an SQLite database" * 100)
    layer, _inner, chain = layered(DiskStore(directory), handler=counting("A", "B"))
    with caplog.at_level(logging.WARNING, logger="polythink.cache"):
        first = await chain.complete(ask())
        # The answer waits in memory for the batch writer until committed; its commit
        # fails here, and the entry is dropped.
        await layer.aclose()
        second = await chain.complete(ask())
    assert (first.text, second.text) == ("A", "B")
    assert (first.cache_hit, second.cache_hit) == (False, False)
    assert len(caplog.records) == 1
    assert "DatabaseError" in caplog.records[0].getMessage()


# --- the disk store ------------------------------------------------------------------------


async def test_the_disk_store_is_private_to_the_user(tmp_path: Path) -> None:
    directory = tmp_path / "nested" / "cache"
    old_mask = os.umask(0o022)
    try:
        _, _, chain = layered(DiskStore(directory))
        await chain.complete(ask())
        await collect(chain, ask(stream=True))
        assert (await chain.complete(ask())).cache_hit is True
    finally:
        os.umask(old_mask)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    files = list(directory.rglob("*"))
    assert {p.name for p in files} >= {"cache.db"}
    for path in files:
        expected = 0o700 if path.is_dir() else 0o600
        assert stat.S_IMODE(path.stat().st_mode) == expected, path


async def test_an_existing_directory_keeps_its_mode_and_the_files_stay_private(
    tmp_path: Path,
) -> None:
    # The caller's own directory (say ".") is not chmod-ed under them; the cache files in
    # it are private all the same.
    directory = tmp_path / "shared"
    directory.mkdir(mode=0o755)
    os.chmod(directory, 0o755)
    _, _, chain = layered(DiskStore(directory))
    await chain.complete(ask())
    assert stat.S_IMODE(directory.stat().st_mode) == 0o755
    files = [p for p in directory.rglob("*") if p.is_file()]
    assert files
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


@pytest.mark.parametrize("flag", ["true", "False", " yes ", "0", ""])
def test_a_flag_string_is_not_taken_for_a_directory(flag: str) -> None:
    with pytest.raises(ValueError, match="looks like a flag, not a directory"):
        cache_store(flag)


@pytest.mark.parametrize("url", ["memcached://x", "redis:/localhost", "file:///tmp/cache"])
def test_a_url_of_another_scheme_is_not_taken_for_a_directory(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInputError) as caught:
        cache_store(url)
    assert type(caught.value) is InvalidInputError
    assert str(caught.value) == (
        f"cache={url!r} is a URL, and a cache is a directory path or a Redis URL "
        "(redis://host:port/db, rediss://... or unix:///path/redis.sock); for a directory "
        "whose name has a colon, pass a pathlib.Path"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_disk_store_keeps_within_its_size_limit(tmp_path: Path) -> None:
    store = DiskStore(tmp_path / "small", size_limit=256 * 1024)
    keys = [f"{i:064x}" for i in range(200)]
    for key in keys:
        store.set(key, os.urandom(4000).hex().encode())
    assert store.volume() <= 256 * 1024
    assert store.get(keys[-1]) is not None
    assert store.get(keys[0]) is None
    kept = sum(1 for key in keys if store.get(key) is not None)
    assert 0 < kept < 200


def test_default_cache_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert default_cache_dir({"XDG_CACHE_HOME": "/var/cache/me"}) == Path("/var/cache/me/polythink")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_cache_dir({"XDG_CACHE_HOME": "relative/path"}) == tmp_path / ".cache/polythink"
    assert default_cache_dir({}) == tmp_path / ".cache/polythink"


def test_the_client_cache_option(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_store(None) is None
    assert cache_store(False) is None
    default = cache_store(True)
    assert isinstance(default, DiskStore)
    assert default.directory == tmp_path / "xdg" / "polythink"
    at_path = cache_store(tmp_path / "here")
    assert isinstance(at_path, DiskStore)
    assert at_path.directory == tmp_path / "here"
    as_text = cache_store(str(tmp_path / "text"))
    assert isinstance(as_text, DiskStore)
    assert as_text.directory == tmp_path / "text"
    mine = DictStore()
    assert cache_store(mine) is mine
    with pytest.raises(ValueError, match="get/set/delete"):
        cache_store(42)
    with pytest.raises(ValueError, match="get/set/delete"):
        Client([SOURCE], cache=object())
    assert not (tmp_path / "xdg").exists()  # opened on first use only


async def test_a_disk_store_ttl_reaches_the_client_layer(tmp_path: Path) -> None:
    client = Client([SOURCE], cache=DiskStore(tmp_path / "c", ttl=30.0))
    caches = [layer for layer in client._call_layers() if isinstance(layer, CacheMiddleware)]
    assert len(caches) == 1
    assert caches[0].ttl == 30.0
    plain = Client([SOURCE])._call_layers()
    assert not any(isinstance(layer, CacheMiddleware) for layer in plain)


async def test_an_unknown_per_call_cache_mode_is_refused() -> None:
    async with Client([SOURCE], cache=DictStore()) as client:
        with pytest.raises(ValueError, match="refresh"):
            await client.complete([{"role": "user", "content": "hi"}], cache="refesh")  # type: ignore[arg-type]


async def test_no_api_key_reaches_any_cache_file(tmp_path: Path) -> None:
    source = Source("openai", "gpt-4o", api_key=API_KEY, headers={"x-team": "t-1"})
    directory = tmp_path / "cache"
    chunks = chat_stream_chunks(["streamed"], usage={"prompt_tokens": 5, "completion_tokens": 1})
    with respx.mock() as router:
        route = router.post(CHAT_URL)
        route.side_effect = [
            httpx.Response(200, json=chat_json("plain")),
            httpx.Response(
                200, content=sse(*chunks), headers={"content-type": "text/event-stream"}
            ),
        ]
        async with Client([source], cache=directory) as client:
            await client.complete([{"role": "user", "content": "hi"}])
            async with aclosing(client.stream([{"role": "user", "content": "hi"}])) as events:
                assert [e.type async for e in events][-1] == "done"
            assert (await client.complete([{"role": "user", "content": "hi"}])).cache_hit
    assert all("authorization" in call.request.headers for call in route.calls)
    files = [p for p in directory.rglob("*") if p.is_file()]
    assert files
    contents = b"".join(p.read_bytes() for p in files)
    assert b"plain" in contents  # the entries really are in these files
    assert b"streamed" in contents
    for secret in (API_KEY.encode(), API_KEY[-12:].encode(), b"Bearer", b"x-team"):
        assert secret not in contents


async def test_headers_and_keys_decide_which_clients_share_a_cache_entry(tmp_path: Path) -> None:
    """Clients sharing one cache directory: a beta header that changes the answer, or another
    key on the same endpoint, is another entry; the same header and key is a hit."""
    question = [{"role": "user", "content": "Summarise the contract."}]
    beta = {"anthropic-beta": "context-1m-2025-08-07"}

    async def asked(api_key: str, headers: dict[str, str] | None = None) -> bool:
        source = Source(
            "anthropic",
            "claude-haiku-4-5",
            api_key=api_key,
            base_url=sim.base_url("anthropic"),
            headers=headers,
        )
        async with Client([source], cache=tmp_path) as client:
            return (await client.complete(question)).cache_hit

    with Simulator() as sim:
        assert await asked("sk-ant-tenant-a-000000") is False
        assert await asked("sk-ant-tenant-a-000000") is True
        assert await asked("sk-ant-tenant-a-000000", beta) is False
        assert await asked("sk-ant-tenant-a-000000", beta) is True
        assert await asked("sk-ant-tenant-b-000000") is False
        assert sim.stats.requests == 3
