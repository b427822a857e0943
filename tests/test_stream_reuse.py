"""A streamed call gives its connection back to the pool; a stream left early does not.

A loopback server replays recorded provider answers the way the providers send them
(``transfer-encoding: chunked``, one chunk per event) and counts the TCP connections it
accepts. The chunked terminator follows the last event after a short pause, as it may come
in a later TCP segment than the end marker on a real network: a client that closes the body
at the end marker without reading on then opens a connection per call on both HTTP layers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import anyio
import pytest

import polythink.transports.base
from polythink import Client, Source, StreamEvent
from polythink.errors import StreamInterruptedError
from tests.conftest import cassette

pytestmark = [pytest.mark.anyio, pytest.mark.fixture_replay]

LAYERS = ("httpx", "aiohttp")
PROMPT = [{"role": "user", "content": "Hello"}]
CALLS = 3
"""Streamed and non-streamed calls made one after the other on each wire and layer."""
TERMINATOR_PAUSE = 0.01
"""Seconds between the last event and the chunked terminator (well under DRAIN_SECONDS)."""
LEAVE_PAUSE = 0.05
"""Seconds before the rest of a stream the caller leaves early: long enough for the caller to
close first, short enough that a client reading on would get the whole rest within
DRAIN_SECONDS (so the reuse that reading on would give shows in the count)."""

_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\ntransfer-encoding: chunked\r\n\r\n"


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _events(raw: bytes) -> list[bytes]:
    """The recorded SSE body split after each event's blank line (Gemini's are CRLF)."""
    separator = b"\r\n\r\n" if b"\r\n\r\n" in raw else b"\n\n"
    return [event + separator for event in raw.split(separator) if event.strip()]


Answer = Callable[[asyncio.StreamWriter], Awaitable[None]]


@dataclass
class Server:
    """Counts connections; answers a streamed request with ``stream`` and any other one
    with ``whole`` (bytes written as one chunked body)."""

    stream: Answer
    whole: bytes = b"{}"
    connections: int = 0
    paths: list[str] = field(default_factory=list)
    cut: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the client closed a connection while a streamed answer was being written."""

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                first, *lines = head.decode("latin-1").split("\r\n")
                length = next(
                    int(value)
                    for name, _, value in (line.partition(":") for line in lines)
                    if name.strip().lower() == "content-length"
                )
                body = json.loads(await reader.readexactly(length))
                path = first.split(" ")[1]
                self.paths.append(path)
                if body.get("stream") or "streamGenerateContent" in path:
                    try:
                        await self.stream(writer)
                    except ConnectionError:
                        self.cut.set()
                        return
                else:
                    writer.write(_HEAD % b"application/json" + _chunk(self.whole) + b"0\r\n\r\n")
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def serving(server: Server) -> AsyncIterator[str]:
    """Serve ``server`` on 127.0.0.1; yield the base URL."""
    listener = await asyncio.start_server(server.connection, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"
    finally:
        listener.close()


def replay(events: list[bytes], *, tail: Answer | None = None) -> Answer:
    """Send ``events`` as chunks, then ``tail`` (by default: a pause, then the terminator)."""

    async def answer(writer: asyncio.StreamWriter) -> None:
        writer.write(_HEAD % b"text/event-stream")
        for event in events:
            writer.write(_chunk(event))
            await writer.drain()
        if tail is not None:
            await tail(writer)
            return
        await asyncio.sleep(TERMINATOR_PAUSE)
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    return answer


@dataclass(frozen=True)
class Wire:
    """One wire: a source on it and two recorded answers with what they say."""

    provider: str
    model: str
    base_path: str
    stream_recording: tuple[str, int]
    stream_text: tuple[str, str]
    whole_recording: tuple[str, int]
    whole_text: str

    def source(self, base_url: str) -> Source:
        return Source(
            self.provider,
            self.model,
            api_key="sk-reuse-test",
            base_url=base_url + self.base_path,
            max_retries=0,
        )

    def events(self) -> list[bytes]:
        name, index = self.stream_recording
        return _events(cassette(name).interactions[index].response_raw)

    def whole(self) -> bytes:
        name, index = self.whole_recording
        return cassette(name).interactions[index].response_raw


WIRES = [
    # Chat Completions: ends at data: [DONE] (OpenAI, gpt-4o-mini, by pydantic-ai).
    Wire(
        "openai",
        "gpt-5.5",
        "/v1",
        ("pai_openai_chat_plain_stream_include_usage.yaml", 1),
        ("The capital of the UK is London.", "The capital of the UK is London."),
        ("pai_openai_chat_reasoning_effort_and_responses.yaml", 1),
        "When it comes to crossing a river safely, the process is quite different",
    ),
    # Responses: ends at response.completed, no [DONE] follows (OpenAI, by simonw/llm).
    Wire(
        "openai-responses",
        "gpt-5.5",
        "/v1",
        ("llm_openai_responses_plain_stream.yaml", 0),
        ("pong", "pong"),
        ("pai_openai_responses_reasoning_effort_low.yaml", 0),
        "Ingredients for the dough:\n",
    ),
    # Anthropic Messages: ends at message_stop (by simonw/llm-anthropic).
    Wire(
        "anthropic",
        "claude-haiku-4-5",
        "/v1",
        ("llmanthropic_plain_stream.yaml", 0),
        ("- Captain\n- Scoop", "- Captain\n- Scoop"),
        ("pai_anthropic_thinking_nonstream.yaml", 0),
        "Here's how to cross the street safely:\n\n## Basic Steps",
    ),
    # Gemini: no end marker, the end of the body ends the stream (by pydantic-ai).
    Wire(
        "gemini",
        "gemini-3-pro-preview",
        "/v1beta",
        ("pai_gemini_thinking_stream_sse.yaml", 0),
        ("This is a great question!", "Always assume a driver might not see you."),
        ("pai_gemini_thinking_nonstream.yaml", 0),
        "Crossing the street safely",
    ),
]
CHAT = WIRES[0]
MARKED = WIRES[:3]
"""The wires whose streams end at an end marker."""


async def _streamed(client: Client) -> list[StreamEvent]:
    return [event async for event in client.stream(PROMPT)]


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("wire", WIRES, ids=[wire.provider for wire in WIRES])
async def test_sequential_calls_share_one_connection(wire: Wire, layer: str) -> None:
    server = Server(replay(wire.events()), whole=wire.whole())
    async with serving(server) as base_url, Client([wire.source(base_url)], http=layer) as client:
        with anyio.fail_after(10):
            for _ in range(CALLS):
                events = await _streamed(client)
                done = events[-1].response
                assert done is not None
                assert done.text.startswith(wire.stream_text[0])
                assert done.text.endswith(wire.stream_text[1])
                assert done.text == "".join(e.text or "" for e in events if e.type == "text")
                answer = await client.complete(PROMPT)
                assert wire.whole_text in answer.text
    assert len(server.paths) == 2 * CALLS
    assert server.connections == 1


async def _break_after_first_text(client: Client) -> None:
    async with contextlib.aclosing(client.stream(PROMPT)) as events:
        async for event in events:
            if event.type == "text":
                break


async def _cancel_after_first_text(client: Client) -> None:
    with anyio.CancelScope() as scope:
        async for event in client.stream(PROMPT):
            if event.type == "text":
                scope.cancel()
    assert scope.cancelled_caught


async def _interrupted_by_error_event(client: Client) -> None:
    with pytest.raises(StreamInterruptedError) as caught:
        await _streamed(client)
    assert caught.value.error_type == "server_error"


_ERROR_EVENT = (
    b'data: {"error":{"message":"The server had an error while processing your request.",'
    b'"type":"server_error","param":null,"code":null}}\n\n'
)


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize(
    "leave",
    [_break_after_first_text, _cancel_after_first_text, _interrupted_by_error_event],
    ids=["break", "cancel", "error"],
)
async def test_a_stream_left_early_closes_its_connection(
    layer: str, leave: Callable[[Client], Awaitable[None]]
) -> None:
    events = CHAT.events()
    # The role delta, then the first text delta ("The").
    head, rest = events[:2], events[2:]
    if leave is _interrupted_by_error_event:
        head = [*head, _ERROR_EVENT]

    async def pause_then_the_rest(writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(LEAVE_PAUSE)
        for event in rest:
            writer.write(_chunk(event))
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    server = Server(replay(head, tail=pause_then_the_rest))
    async with (
        serving(server) as base_url,
        Client([CHAT.source(base_url)], http=layer) as client,
    ):
        with anyio.fail_after(10):
            await leave(client)
            server.stream = replay(events)
            events_after = await _streamed(client)
    done = events_after[-1].response
    assert done is not None
    assert done.text == "The capital of the UK is London."
    # The left stream's connection was closed, not read on: the next call needed another.
    assert server.connections == 2


def _endless(piece: bytes, pause: float) -> Answer:
    async def keep_sending(writer: asyncio.StreamWriter) -> None:
        while True:
            writer.write(_chunk(piece))
            await writer.drain()
            await asyncio.sleep(pause)

    return keep_sending


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("wire", MARKED, ids=[wire.provider for wire in MARKED])
@pytest.mark.parametrize(
    ("piece", "pause", "patched_seconds"),
    [
        # Fast: only the byte bound can stop it (the time bound is lifted).
        (b": " + b"x" * 16_381 + b"\n\n", 0.0, 60.0),
        # A trickle: the time bound stops it long before DRAIN_BYTES.
        (b": keep-alive\n\n", 0.01, None),
    ],
    ids=["bytes", "time"],
)
async def test_a_body_that_goes_on_after_the_end_marker_is_cut_at_the_bound(
    wire: Wire,
    layer: str,
    piece: bytes,
    pause: float,
    patched_seconds: float | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if patched_seconds is not None:
        monkeypatch.setattr(polythink.transports.base, "DRAIN_SECONDS", patched_seconds)
    server = Server(replay(wire.events(), tail=_endless(piece, pause)))
    async with (
        serving(server) as base_url,
        Client([wire.source(base_url)], http=layer) as client,
    ):
        with anyio.fail_after(10):
            first = await _streamed(client)
            server.stream = replay(wire.events())
            second = await _streamed(client)
            await server.cut.wait()
    for events in (first, second):
        done = events[-1].response
        assert done is not None
        assert done.text.startswith(wire.stream_text[0])
        assert done.text.endswith(wire.stream_text[1])
    # The client closed the endless body's connection; the next call opened another.
    assert server.connections == 2
