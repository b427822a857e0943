"""Servers that send too much, too fast or forever: deadlines hold, memory stays bounded.

Each test runs on both HTTP layers (httpx's own pool and aiohttp's, the default) against a
loopback server that writes from a thread with a blocking socket as fast as the client
takes it (:class:`tests.loopback.FloodServer`), or against an in-memory stream that never
waits at all. A server stops on its own after a while, so a client that would read forever
fails its test instead of hanging the suite.
"""

from __future__ import annotations

import functools
import gzip
import time
from collections.abc import AsyncIterator, Iterator

import anyio
import anyio.lowlevel
import httpx
import pytest

from polythink import Client, ReadLimits, Source, Timeout
from polythink.errors import (
    PolythinkError,
    RequestTimeoutError,
    ResponseTooLargeError,
    StreamInterruptedError,
)
from tests.loopback import FloodServer

LAYERS = ("httpx", "aiohttp")
PROMPT = [{"role": "user", "content": "Tell me everything."}]
SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)
JSON_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
)
DELTA = b'data: {"choices":[{"index":0,"delta":{"content":"word "}}]}\n\n'
WORDS = b'data: {"choices":[{"index":0,"delta":{"content":"%s"}}]}\n\n' % (b"word " * 400)
MiB = 1024 * 1024


def chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def endless(block: bytes) -> Iterator[bytes]:
    piece = chunked(block)
    while True:
        yield piece


def source(base_url: str, **kwargs: object) -> Source:
    return Source(
        "openai",
        "gpt-5.5",
        api_key="sk-test",
        base_url=base_url,
        max_retries=0,
        **kwargs,  # type: ignore[arg-type]
    )


async def drain(client: Client, **kwargs: object) -> int:
    """Read a whole stream; return how many text events arrived."""
    texts = 0
    async for event in client.stream(PROMPT, **kwargs):  # type: ignore[arg-type]
        texts += event.type == "text"
    return texts


def cause(error: BaseException) -> BaseException:
    """The error behind a stream that broke after its first output, else ``error``."""
    if isinstance(error, StreamInterruptedError) and error.__cause__ is not None:
        return error.__cause__
    return error


# -- 1. deadlines that fire whatever the server sends ------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("layer", LAYERS)
async def test_a_fast_endless_stream_ends_at_the_total_deadline(layer: str) -> None:
    with FloodServer(SSE_HEAD, lambda: endless(DELTA * 1000), seconds=30) as server:
        async with Client([source(server.base_url(), timeout=Timeout(total=0.5))], http=layer) as c:
            began = time.monotonic()
            with pytest.raises(PolythinkError) as caught:
                await drain(c)
            took = time.monotonic() - began
    error = cause(caught.value)
    assert isinstance(error, RequestTimeoutError)
    assert error.error_type == "deadline"
    # The server would have gone on for 30 s; the deadline was 0.5 s (a busy machine may be late
    # by a few seconds, never by the server's whole run).
    assert took < 15, took


@pytest.mark.anyio
@pytest.mark.parametrize("layer", LAYERS)
async def test_a_fast_endless_stream_ends_at_the_callers_own_cancel_scope(layer: str) -> None:
    with FloodServer(SSE_HEAD, lambda: endless(DELTA * 1000), seconds=30) as server:
        async with Client([source(server.base_url())], http=layer) as client:
            began = time.monotonic()
            with anyio.move_on_after(0.5) as scope:
                await drain(client, timeout=100)
            took = time.monotonic() - began
    assert scope.cancelled_caught
    assert took < 15, took


@pytest.mark.anyio
@pytest.mark.parametrize("layer", LAYERS)
async def test_a_non_streamed_body_that_never_ends_ends_at_the_deadline(layer: str) -> None:
    opening = chunked(b'{"id":"c1","choices":[{"index":0,"message":{"content":"')

    def body() -> Iterator[bytes]:
        yield opening
        yield from endless(b"word " * 2000)

    with FloodServer(JSON_HEAD, body, seconds=30) as server:
        limits = ReadLimits(max_body=2**40, max_decoded=2**40)
        src = source(server.base_url(), timeout=Timeout(total=0.5), read_limits=limits)
        async with Client([src], http=layer) as client:
            began = time.monotonic()
            with pytest.raises(RequestTimeoutError) as caught:
                await client.complete(PROMPT)
            took = time.monotonic() - began
    assert caught.value.error_type == "deadline"
    assert took < 15, took


class NeverWaits(httpx.AsyncByteStream):
    """A body whose every chunk is ready at once: reading it never gives the loop a turn by
    itself. It ends after ``seconds`` so a reader that never yields ends too."""

    def __init__(self, chunk: bytes, seconds: float) -> None:
        self.chunk = chunk
        self.seconds = seconds

    async def __aiter__(self) -> AsyncIterator[bytes]:
        until = time.monotonic() + self.seconds
        while time.monotonic() < until:
            yield self.chunk


def never_waiting(chunk: bytes, seconds: float = 8.0) -> httpx.AsyncClient:
    def answer(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, stream=NeverWaits(chunk, seconds))

    return httpx.AsyncClient(transport=httpx.MockTransport(answer))


@pytest.mark.anyio
async def test_a_reader_of_buffered_data_lets_other_tasks_run_and_keeps_its_deadline() -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await anyio.lowlevel.checkpoint()
            ticks += 1

    http = never_waiting(DELTA * 100)
    src = source("http://127.0.0.1:9/v1", timeout=0.5)
    async with Client([src], http_client=http) as client, anyio.create_task_group() as tasks:
        tasks.start_soon(ticker)
        with pytest.raises(StreamInterruptedError) as caught:
            await drain(client)
        ticks_during = ticks
        tasks.cancel_scope.cancel()
    error = cause(caught.value)
    assert isinstance(error, RequestTimeoutError)
    assert error.error_type == "deadline"
    # Without a turn now and then the other task would not have run once before the end.
    assert ticks_during >= 10


@pytest.mark.anyio
async def test_a_reader_of_buffered_data_is_cancelled_by_the_callers_scope() -> None:
    http = never_waiting(DELTA * 100)
    async with Client([source("http://127.0.0.1:9/v1")], http_client=http) as client:
        began = time.monotonic()
        with anyio.move_on_after(0.5) as scope:
            await drain(client, timeout=100)
        took = time.monotonic() - began
    assert scope.cancelled_caught
    assert took < 6, took  # the stream itself would have ended after 8 s


# -- 4. what one answer may hold ----------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("layer", LAYERS)
async def test_one_endless_line_is_refused_at_the_line_limit(layer: str) -> None:
    def body() -> Iterator[bytes]:
        yield chunked(b'data: {"choices":[{"index":0,"delta":{"content":"')
        yield from endless(b"x" * 65536)

    with FloodServer(SSE_HEAD, body, seconds=30) as server:
        limits = ReadLimits(max_line=4 * MiB)
        async with Client([source(server.base_url(), read_limits=limits)], http=layer) as c:
            with pytest.raises(ResponseTooLargeError) as caught:
                await drain(c)
    error = caught.value
    assert error.limit == "max_line"
    assert error.limit_value == 4 * MiB
    assert error.error_type == "response_too_large"
    assert error.should_retry is False
    assert "ReadLimits.max_line" in str(error)
    assert "4,194,304 characters" in str(error)


@pytest.mark.anyio
async def test_a_128_mb_line_is_refused_by_the_default_limits() -> None:
    line = b'data: {"choices":[{"index":0,"delta":{"content":"' + b"x" * (128 * MiB)

    def body() -> Iterator[bytes]:
        for start in range(0, len(line), 1 * MiB):
            yield chunked(line[start : start + 1 * MiB])

    with FloodServer(SSE_HEAD, body, seconds=30) as server:
        async with Client([source(server.base_url())]) as client:
            with pytest.raises(ResponseTooLargeError) as caught:
                await drain(client)
        sent = server.sent
    assert caught.value.limit == "max_line"
    assert caught.value.limit_value == ReadLimits().max_line == 32 * MiB
    assert sent < 100 * MiB  # refused once past the limit, not read to the end


@pytest.mark.anyio
async def test_a_long_line_within_the_limit_is_read_whole() -> None:
    text = "y" * (6 * MiB)
    event = b'data: {"choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":"stop"}]}\n\n'
    data = event % text.encode() + b"data: [DONE]\n\n"

    def body() -> Iterator[bytes]:
        for start in range(0, len(data), 16384):
            yield chunked(data[start : start + 16384])
        yield b"0\r\n\r\n"

    with FloodServer(SSE_HEAD, body) as server:
        async with Client([source(server.base_url())], http="aiohttp") as client:
            events = [e async for e in client.stream(PROMPT)]
    done = events[-1].response
    assert done is not None
    assert done.text == text


@pytest.mark.anyio
@pytest.mark.parametrize("layer", LAYERS)
async def test_an_event_of_many_lines_is_refused_at_the_event_limit(layer: str) -> None:
    with FloodServer(SSE_HEAD, lambda: endless(b"data: " + b"z" * 1000 + b"\n"), 30) as server:
        limits = ReadLimits(max_event=2 * MiB)
        async with Client([source(server.base_url(), read_limits=limits)], http=layer) as c:
            with pytest.raises(ResponseTooLargeError) as caught:
                await drain(c)
    assert caught.value.limit == "max_event"
    assert caught.value.limit_value == 2 * MiB


@pytest.mark.anyio
@pytest.mark.parametrize("layer", LAYERS)
async def test_an_endless_stream_is_refused_at_the_body_limit(layer: str) -> None:
    with FloodServer(SSE_HEAD, lambda: endless(WORDS * 30), seconds=30) as server:
        limits = ReadLimits(max_body=4 * MiB)
        src = source(server.base_url(), read_limits=limits, timeout=Timeout(total=60))
        async with Client([src], http=layer) as client:
            with pytest.raises(StreamInterruptedError) as caught:
                await drain(client)
    error = cause(caught.value)
    assert isinstance(error, ResponseTooLargeError)
    assert error.limit == "max_body"
    partial = caught.value.partial
    # What reached the caller is within the limit: at most 4 MiB of events.
    assert 0 < len(partial.text) <= 4 * MiB // len(WORDS) * 2000


@pytest.mark.anyio
@pytest.mark.parametrize("layer", LAYERS)
async def test_a_content_length_over_the_body_limit_is_refused_before_reading(layer: str) -> None:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 209715200\r\n\r\n"
    with FloodServer(head, lambda: iter([b"{" + b" " * 65536] * 3200), seconds=30) as server:
        async with Client([source(server.base_url())], http=layer) as client:
            with pytest.raises(ResponseTooLargeError) as caught:
                await client.complete(PROMPT)
    assert caught.value.limit == "max_body"
    assert caught.value.limit_value == 128 * MiB
    assert "a body over 134,217,728 bytes" in str(caught.value)


@functools.cache
def gzip_bomb(size: int) -> bytes:
    """``size`` spaces, gzip-compressed (64 MiB: about 64 KB): built once for the tests."""
    return gzip.compress(b" " * size, compresslevel=6)


@pytest.mark.anyio
@pytest.mark.parametrize("layer", LAYERS)
async def test_a_gzip_bomb_is_refused_at_the_decompressed_limit(layer: str) -> None:
    bomb = gzip_bomb(64 * MiB)
    assert len(bomb) < 100_000
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\n"
        b"content-length: %d\r\n\r\n" % len(bomb)
    )
    with FloodServer(head, lambda: iter([bomb])) as server:
        limits = ReadLimits(max_decoded=8 * MiB)
        async with Client([source(server.base_url(), read_limits=limits)], http=layer) as c:
            with pytest.raises(ResponseTooLargeError) as caught:
                await c.complete(PROMPT)
    assert caught.value.limit == "max_decoded"
    assert caught.value.limit_value == 8 * MiB
    assert "once decompressed" in str(caught.value)


@pytest.mark.anyio
@pytest.mark.parametrize("layer", LAYERS)
async def test_a_streamed_gzip_bomb_is_refused_at_the_decompressed_limit(layer: str) -> None:
    bomb = gzip_bomb(64 * MiB)
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip\r\n"
        b"content-length: %d\r\n\r\n" % len(bomb)
    )
    with FloodServer(head, lambda: iter([bomb])) as server:
        limits = ReadLimits(max_decoded=8 * MiB)
        async with Client([source(server.base_url(), read_limits=limits)], http=layer) as c:
            with pytest.raises(ResponseTooLargeError) as caught:
                await drain(c)
    assert caught.value.limit == "max_decoded"


def test_read_limits_refuse_what_is_not_a_positive_whole_number() -> None:
    for value in (0, -1, 1.5, True, "8"):
        with pytest.raises(ValueError, match=r"ReadLimits.max_body must be a positive whole"):
            ReadLimits(max_body=value)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Source.read_limits must be a polythink.ReadLimits"):
        Source("openai", "gpt-5.5", read_limits={"max_body": 1})  # type: ignore[arg-type]
