"""The HTTP layer under httpx: which one a client picks, and that both behave the same.

Each behaviour test runs once per layer (httpx's own pool, aiohttp's) against a small
loopback server that misbehaves on purpose, or against the simulator.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import gc
import socket
import ssl
import struct
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from httpx_aiohttp import AiohttpTransport

import polythink.http
from polythink import Client, Source, Timeout
from polythink.errors import RequestTimeoutError, TransientError
from polythink.http import build_http_client
from polythink.simulator import Simulator
from polythink.transports.base import deadline_scope

LAYERS = ("httpx", "aiohttp")
PROMPT = [{"role": "user", "content": "Why is the sky blue?"}]

Behaviour = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def serve(behaviour: Behaviour) -> AsyncIterator[str]:
    """Serve ``behaviour`` for every connection on 127.0.0.1; yield the base URL."""

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            await reader.readuntil(b"\r\n\r\n")
            await behaviour(reader, writer)
        writer.close()

    server = await asyncio.start_server(connection, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.close()


async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def stall_after_head(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    chunk = b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"transfer-encoding: chunked\r\n\r\n" + b"%x\r\n%s\r\n" % (len(chunk), chunk)
    )
    await writer.drain()
    await asyncio.sleep(3)


def source(base_url: str, **kwargs: object) -> Source:
    """A source without retries, so each test sees the HTTP layer's own outcome."""
    return Source(
        "openai",
        "gpt-5.5",
        api_key="sk-test",
        base_url=base_url,
        max_retries=0,
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.mark.anyio
async def test_auto_picks_aiohttp_under_asyncio_and_httpx_is_explicit() -> None:
    auto = build_http_client("auto")
    own = build_http_client("httpx")
    try:
        assert isinstance(auto._transport, AiohttpTransport)
        assert isinstance(own._transport, httpx.AsyncHTTPTransport)
    finally:
        await auto.aclose()
        await own.aclose()


def test_auto_outside_an_event_loop_uses_httpx() -> None:
    client = build_http_client("auto")
    assert isinstance(client._transport, httpx.AsyncHTTPTransport)


@pytest.mark.anyio
async def test_auto_falls_back_to_httpx_without_the_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("polythink.http._aiohttp_available", lambda: False)
    client = build_http_client("auto")
    try:
        assert isinstance(client._transport, httpx.AsyncHTTPTransport)
    finally:
        await client.aclose()
    with pytest.raises(ValueError, match=r"http='aiohttp' needs the httpx-aiohttp package"):
        Client([source("http://127.0.0.1:1/v1")], http="aiohttp")


@pytest.mark.anyio
async def test_every_client_shares_one_ssl_context(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[ssl.SSLContext] = []
    real = httpx.create_ssl_context

    def counting(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        context = real(*args, **kwargs)
        if not args and not kwargs:
            built.append(context)
        return context

    monkeypatch.setattr(polythink.http, "_ssl_context", None)
    monkeypatch.setattr(httpx, "create_ssl_context", counting)
    clients = [build_http_client(layer) for layer in ("httpx", "aiohttp", "httpx", "aiohttp")]
    try:
        assert len(built) == 1
        shared = polythink.http.default_ssl_context()
        assert shared is built[0]
        assert shared.verify_mode is ssl.CERT_REQUIRED
        assert shared.check_hostname is True
        pools = [c._transport for c in clients]
        assert all(p._pool._ssl_context is shared for p in pools[::2])  # type: ignore[attr-defined]
        assert all(p.ssl_context is shared for p in pools[1::2])  # type: ignore[attr-defined]
    finally:
        for client in clients:
            await client.aclose()


def test_unknown_layer_is_refused_when_the_client_is_built() -> None:
    with pytest.raises(ValueError, match=r"http must be one of auto, httpx, aiohttp; got 'curl'"):
        Client([source("http://127.0.0.1:1/v1")], http="curl")  # type: ignore[arg-type]


@pytest.mark.anyio
@pytest.mark.parametrize("layer", LAYERS)
async def test_same_answer_on_both_layers(layer: str) -> None:
    with Simulator() as sim:
        async with Client([source(sim.base_url("openai"))], http=layer) as client:
            response = await client.complete(PROMPT, reasoning_effort="low")
            events = [e async for e in client.stream(PROMPT, reasoning_effort="low")]
    assert response.text.startswith("Simulated gpt-5.5 answer")
    assert len(response.text.split()) == 12
    assert response.usage is not None
    assert response.usage.reasoning_tokens == 40
    done = events[-1].response
    assert done is not None
    assert done.text == response.text
    assert done.usage == response.usage


@pytest.mark.anyio
@pytest.mark.parametrize("layer", LAYERS)
async def test_reset_before_the_response_is_a_connection_error(layer: str) -> None:
    async with serve(reset) as base_url, Client([source(base_url)], http=layer) as client:
        with pytest.raises(TransientError) as caught:
            await client.complete(PROMPT)
    assert not isinstance(caught.value, RequestTimeoutError)
    assert caught.value.error_type == "connection_error"


@pytest.mark.anyio
@pytest.mark.parametrize("layer", LAYERS)
async def test_stream_idle_timeout_applies_after_the_head(layer: str) -> None:
    timeout = Timeout(first_byte=10.0, idle=0.3)
    async with (
        serve(stall_after_head) as base_url,
        Client([source(base_url, timeout=timeout)], http=layer) as client,
    ):
        began = time.monotonic()
        with pytest.raises(RequestTimeoutError) as caught:
            async for _ in client.stream(PROMPT):
                pass
        waited = time.monotonic() - began
    assert caught.value.error_type == "idle_timeout"
    # The idle timeout (0.3 s) ended the wait, not the first-byte one (10 s) or the stall (3 s).
    assert waited < 2.5


ANSWER = (
    b'{"id":"c1","object":"chat.completion","created":1,"model":"gpt-5.5","choices":'
    b'[{"index":0,"message":{"role":"assistant","content":"Blue."},"finish_reason":"stop"}]}'
)


def reply_with_head(size: int, *, pad: int = 1) -> bytes:
    """A 200 answer whose head (status line to the empty line, CRLFs included) is exactly
    ``size`` bytes on the wire, the excess carried by ``pad`` headers ``x-pad-N``."""
    head = (
        b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n" % len(ANSWER)
    )
    left = size - len(head) - 2
    lines = []
    for n in range(pad):
        name = b"x-pad-%d: " % n
        value = (left // (pad - n)) - len(name) - 2
        lines.append(name + b"a" * value + b"\r\n")
        left -= len(lines[-1])
    wire = head + b"".join(lines) + b"\r\n"
    assert len(wire) == size
    return wire + ANSWER


def answer_with_head(size: int, *, pad: int = 1) -> Behaviour:
    async def behaviour(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(reply_with_head(size, pad=pad))
        await writer.drain()

    return behaviour


def test_the_head_limit_is_httpcores() -> None:
    # h11 refuses an incomplete event over this many bytes; httpcore 1.0 sets 100 KiB
    # (httpcore/_async/http11.py, MAX_INCOMPLETE_EVENT_SIZE = 100 * 1024).
    import httpcore

    assert polythink.http.HEAD_BYTES == httpcore.AsyncHTTP11Connection.MAX_INCOMPLETE_EVENT_SIZE
    assert polythink.http.HEAD_BYTES == 102_400


@pytest.mark.anyio
@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize(
    ("size", "pad"),
    [(9_000, 1), (20_000, 1), (70_000, 1), (102_400, 1), (102_400, 200)],
    ids=["9000", "20000", "70000", "at-the-limit", "200-headers-at-the-limit"],
)
async def test_a_long_head_up_to_the_limit_is_read_by_both(layer: str, size: int, pad: int) -> None:
    async with (
        serve(answer_with_head(size, pad=pad)) as base_url,
        Client([source(base_url)], http=layer) as client,
    ):
        response = await client.complete(PROMPT)
    assert response.text == "Blue."


@pytest.mark.anyio
@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize(
    ("size", "pad"),
    # One byte over; a head httpcore alone reads when it arrives whole in its second read;
    # 30 headers of 5 KB (aiohttp alone has no limit on the whole head); far over.
    [(102_401, 1), (110_000, 1), (150_000, 30), (200_000, 1)],
    ids=["one-byte-over", "110000", "30-headers", "200000"],
)
async def test_a_head_over_the_limit_is_refused_by_both(layer: str, size: int, pad: int) -> None:
    async with (
        serve(answer_with_head(size, pad=pad)) as base_url,
        Client([source(base_url)], http=layer) as client,
    ):
        with pytest.raises(TransientError) as caught:
            await client.complete(PROMPT)
    assert caught.value.error_type == "connection_error"
    assert "RemoteProtocolError" in caught.value.message


@pytest.mark.anyio
@pytest.mark.parametrize("layer", LAYERS)
async def test_a_response_is_freed_as_soon_as_the_call_is_done(layer: str) -> None:
    # httpx leaves a cycle between a response and its stream; the transport breaks it, so
    # reference counting frees the response (and its request, headers and the HTTP layer's
    # objects) without waiting for the cyclic collector.
    http = build_http_client(layer)  # type: ignore[arg-type]
    seen: list[weakref.ref[httpx.Response]] = []

    async def keep(response: httpx.Response) -> None:
        seen.append(weakref.ref(response))

    http.event_hooks["response"] = [keep]
    with Simulator() as sim:
        async with Client([source(sim.base_url("openai"))], http_client=http) as client:
            await client.complete(PROMPT)
            gc.disable()
            try:
                await client.complete(PROMPT, cache=False)
                async for _ in client.stream(PROMPT):
                    pass
                assert len(seen) == 3
                assert [ref() is None for ref in seen[1:]] == [True, True]
            finally:
                gc.enable()
    await http.aclose()


class _Marker:
    pass


_IN_CALL: contextvars.ContextVar[_Marker | None] = contextvars.ContextVar("in_call", default=None)


@pytest.mark.anyio
async def test_a_deadline_keeps_nothing_of_its_call_once_it_is_over() -> None:
    # asyncio keeps a cancelled timer, with its context, until the time it was set for: the
    # timer of a call that ended in time must not hold what the call's context holds.
    held: list[weakref.ref[_Marker]] = []

    async def call() -> bool:
        marker = _Marker()
        held.append(weakref.ref(marker))
        _IN_CALL.set(marker)
        with deadline_scope(600.0) as scope:
            await asyncio.sleep(0)
        return scope.cancelled_caught

    # Another timer due sooner (a pool's keep-alive, another call's deadline) keeps the
    # cancelled one in the schedule.
    sooner = asyncio.get_running_loop().call_later(100.0, lambda: None)
    gc.disable()
    try:
        assert await asyncio.create_task(call()) is False
        for _ in range(3):
            await asyncio.sleep(0)  # the loop lets go of the finished task
        assert held[0]() is None
    finally:
        gc.enable()
        sooner.cancel()
    started = time.monotonic()
    with deadline_scope(0.05) as scope:
        await asyncio.sleep(5)
    assert scope.cancelled_caught
    assert 0.04 < time.monotonic() - started < 1.0
