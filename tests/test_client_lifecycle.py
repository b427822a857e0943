"""A client's edges on both HTTP layers: large bodies, use after close, a client left open."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import json
import warnings
from collections.abc import AsyncIterator

import httpx
import pytest

from polythink import Client, ClientClosedError, Source
from polythink.simulator import Settings, Simulator

LAYERS = ("httpx", "aiohttp")
CLOSED = (
    "the client is closed (aclose() ran, or its 'async with' block ended); open it again "
    "with 'async with client:' or client.start()"
)
ANSWER = json.dumps(
    {
        "id": "c1",
        "model": "gpt-4o",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
    }
).encode()


def source(base_url: str) -> Source:
    return Source("openai", "gpt-4o", api_key="sk-test", base_url=base_url, max_retries=0)


@contextlib.asynccontextmanager
async def recording_server(bodies: list[bytes]) -> AsyncIterator[str]:
    """Answer every chat call with ``ANSWER``; keep each request body whole."""

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
                length = int(head.split("content-length:")[1].split("\r\n")[0])
                bodies.append(await reader.readexactly(length))
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER)
                )
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(connection, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    finally:
        server.close()


@pytest.mark.anyio
@pytest.mark.filterwarnings("error::ResourceWarning")
@pytest.mark.parametrize("layer", LAYERS)
async def test_a_body_over_one_mebibyte_is_sent_whole_without_a_warning(layer: str) -> None:
    prompt = "é" * (3 * 2**20 // 2 + 7)  # 3 MiB + 14 bytes of UTF-8 in the content
    bodies: list[bytes] = []
    async with recording_server(bodies) as base_url, Client([source(base_url)], http=layer) as c:
        response = await c.complete([{"role": "user", "content": prompt}])
    assert response.text == "ok"
    (body,) = bodies
    assert len(body) > 3 * 2**20
    assert json.loads(body)["messages"] == [{"role": "user", "content": prompt}]


@pytest.mark.anyio
@pytest.mark.parametrize("layer", LAYERS)
async def test_a_call_after_close_is_one_typed_error_on_both_layers(layer: str) -> None:
    with Simulator() as sim:
        client = Client([source(sim.base_url("openai"))], http=layer)
        async with client:
            assert (await client.complete([{"role": "user", "content": "hi"}])).text
        with pytest.raises(ClientClosedError) as caught:
            await client.complete([{"role": "user", "content": "hi"}])
        assert str(caught.value) == CLOSED
        assert isinstance(caught.value, RuntimeError)
        with pytest.raises(ClientClosedError, match=r"^the client is closed \(aclose"):
            [e async for e in client.stream([{"role": "user", "content": "hi"}])]
        # It opens again.
        async with client:
            assert (await client.complete([{"role": "user", "content": "hi"}])).text


@pytest.mark.anyio
@pytest.mark.parametrize("layer", LAYERS)
async def test_a_stream_read_after_close_is_the_same_typed_error(layer: str) -> None:
    with Simulator(Settings(chunk_delay=0.02)) as sim:
        client = Client([source(sim.base_url("openai"))], http=layer)
        client.start()
        events = client.stream([{"role": "user", "content": "hi"}])
        first = await events.__anext__()
        assert first.type in ("text", "reasoning")
        await client.aclose()
        with pytest.raises(ClientClosedError) as caught:
            async for _ in events:
                pass
    assert str(caught.value) == CLOSED


@pytest.mark.anyio
async def test_a_closed_http_client_of_the_callers_is_named() -> None:
    http = httpx.AsyncClient()
    await http.aclose()
    async with Client([source("http://127.0.0.1:9/v1")], http_client=http) as client:
        with pytest.raises(ClientClosedError) as caught:
            await client.complete([{"role": "user", "content": "hi"}])
    assert str(caught.value) == (
        "the client is closed: the httpx.AsyncClient given as http_client was closed by its owner"
    )


@pytest.mark.anyio
async def test_a_started_client_collected_open_warns_once_and_says_aclose() -> None:
    client = Client([source("http://127.0.0.1:9/v1")], http="httpx")
    client.start()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        del client
        gc.collect()
    ours = [w for w in seen if "never closed" in str(w.message)]
    assert len(ours) == 1
    assert ours[0].category is ResourceWarning
    assert str(ours[0].message) == (
        "<Client sources=[openai/gpt-4o at http://127.0.0.1:9/v1] http=httpx cache=off open> "
        "was started and never closed: call 'await client.aclose()' or use "
        "'async with Client(...)'"
    )


@pytest.mark.anyio
async def test_a_closed_or_never_started_client_does_not_warn() -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        closed = Client([source("http://127.0.0.1:9/v1")], http="httpx")
        async with closed:
            pass
        never = Client([source("http://127.0.0.1:9/v1")])
        del closed, never
        gc.collect()
    assert [str(w.message) for w in seen if "never closed" in str(w.message)] == []


def test_a_client_not_started_says_how_to_start_and_close() -> None:
    client = Client([source("http://127.0.0.1:9/v1")])
    with pytest.raises(RuntimeError) as caught:
        asyncio.run(client.complete([{"role": "user", "content": "hi"}]))
    assert not isinstance(caught.value, ClientClosedError)
    assert str(caught.value) == (
        "use the client inside 'async with Client(...)', or call client.start() (no "
        "await) and later 'await client.aclose()'"
    )


def test_repr_shows_the_sources_and_never_a_key() -> None:
    client = Client(
        [
            Source(
                "openai", "gpt-5.5", api_key="sk-live-0123456789abcdef", reasoning_effort="high"
            ),
            Source("deepseek", "deepseek-v4-pro", api_key="sk-deep-0123456789abcdef"),
        ]
    )
    text = repr(client)
    assert text == (
        "<Client sources=[openai/gpt-5.5 reasoning_effort=high, deepseek/deepseek-v4-pro] "
        "http=auto cache=off not started>"
    )


@pytest.mark.anyio
async def test_start_is_synchronous_and_aclose_is_awaited() -> None:
    shown = "<Client sources=[openai/gpt-4o at http://127.0.0.1:9/v1] http=auto cache=off"
    assert not inspect.iscoroutinefunction(Client.start)
    assert inspect.iscoroutinefunction(Client.aclose)
    client = Client([source("http://127.0.0.1:9/v1")])
    client.start()  # a plain call, as the HTTP layer guide shows: nothing to await
    assert repr(client) == f"{shown} open>"
    await client.aclose()
    assert repr(client) == f"{shown} closed>"


def _collected_open(http: str, base_url: str) -> list[tuple[str, str]]:
    """Start a client, make one call, drop it open; every warning seen, (category, text head)."""

    async def run() -> list[tuple[str, str]]:
        client = Client([source(base_url)], http=http)
        client.start()
        await client.complete([{"role": "user", "content": "hi"}])
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            del client
            gc.collect()
            # A recorded warning keeps its source alive: let go of it, then collect again.
            for caught in seen:
                caught.source = None
            gc.collect()
        # Object reprs (addresses, file descriptors) vary: keep the text before them.
        return [
            (w.category.__name__, str(w.message).replace(base_url, "URL").split(" <", 1)[0])
            for w in seen
        ]

    return asyncio.run(run())


OURS = (
    "<Client sources=[openai/gpt-4o at URL] http={} cache=off open> was started and never "
    "closed: call 'await client.aclose()' or use 'async with Client(...)'"
)


def test_a_client_collected_open_on_aiohttp_warns_as_the_readme_says(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with Simulator() as sim, caplog.at_level("ERROR", logger="asyncio"):
        seen = _collected_open("aiohttp", sim.base_url("openai"))
    assert seen == [
        ("ResourceWarning", OURS.format("aiohttp")),
        ("ResourceWarning", "Unclosed client session"),
        ("ResourceWarning", "Unclosed connector"),
    ]
    assert [(r.name, r.levelname, r.getMessage().split("\n", 1)[0]) for r in caplog.records] == [
        ("asyncio", "ERROR", "Unclosed client session"),
        ("asyncio", "ERROR", "Unclosed connector"),
    ]


def test_a_client_collected_open_on_httpx_warns_as_the_readme_says() -> None:
    with Simulator() as sim:
        seen = _collected_open("httpx", sim.base_url("openai"))
    assert seen == [
        ("ResourceWarning", OURS.format("httpx")),
        ("ResourceWarning", "unclosed transport"),
    ]
