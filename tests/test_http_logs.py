"""No key in httpcore's DEBUG log while a client is open, and no filter left once it closes.

httpcore 1.0 logs every response header it reads at DEBUG
(``receive_response_headers.complete return_value=(b'HTTP/1.1', 200, b'OK', [...])``), so a
server that echoes the request's headers back puts the key in that log.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator

import pytest

from polythink import Client, Source
from polythink.http import HTTP_LOGGERS, redact_http_logs, release_http_logs

# Shaped like no known provider key: only the client's own list of keys can find it.
KEY = "vllm-token-0123456789abcdef"
ORG = "org-credential-9876543210"
ANSWER = (
    b'{"id":"c1","object":"chat.completion","created":1,"model":"gpt-5.5","choices":'
    b'[{"index":0,"message":{"role":"assistant","content":"Blue."},"finish_reason":"stop"}]}'
)
PROMPT = [{"role": "user", "content": "Why is the sky blue?"}]


@contextlib.asynccontextmanager
async def echoing_server(seen: list[bytes]) -> AsyncIterator[str]:
    """Answer every request with its own header lines echoed as ``x-echo-*`` headers."""

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        await reader.readexactly(length)
        seen.append(head)
        echoed = b"".join(
            b"x-echo-" + line + b"\r\n" for line in head.split(b"\r\n")[1:] if b":" in line
        )
        writer.write(
            b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-type: application/json\r\n"
            + echoed
            + b"content-length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER)
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(connection, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    finally:
        server.close()


def filtered() -> list[str]:
    return [name for name in HTTP_LOGGERS if logging.getLogger(name).filters]


@pytest.mark.anyio
async def test_keys_echoed_by_a_server_are_redacted_in_httpcores_debug_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="httpcore")
    seen: list[bytes] = []
    async with echoing_server(seen) as base_url:
        source = Source(
            "vllm",
            "my-model",
            api_key=KEY,
            base_url=base_url,
            headers={"X-Org-Secret": ORG},
            max_retries=0,
        )
        async with Client([source], http="httpx") as client:
            assert filtered() == list(HTTP_LOGGERS)
            response = await client.complete(PROMPT)
    assert response.text == "Blue."
    # The server did echo both credentials, so httpcore read them.
    assert f"authorization: Bearer {KEY}".encode() in seen[0]
    assert f"x-org-secret: {ORG}".encode() in seen[0]
    lines = [r.getMessage() for r in caplog.records if r.name == "httpcore.http11"]
    echoed = next(line for line in lines if line.startswith("receive_response_headers.complete"))
    assert "(b'x-echo-authorization', b'Bearer [REDACTED]')" in echoed
    assert "(b'x-echo-x-org-secret', b'[REDACTED]')" in echoed
    assert KEY not in caplog.text
    assert ORG not in caplog.text
    # Closed: the filter left httpcore's loggers.
    assert filtered() == []


def logged(text: str) -> str:
    """``text`` as a record of httpcore's would read once its logger's filters ran."""
    record = logging.LogRecord("httpcore.http11", logging.DEBUG, "", 0, "saw %s", (text,), None)
    logging.getLogger("httpcore.http11").filter(record)
    return record.getMessage()


@pytest.mark.anyio
async def test_each_client_keys_are_redacted_while_it_is_open() -> None:
    url = "http://127.0.0.1:1/v1"
    first = Client([Source("vllm", "m", api_key="first-token-0000000", base_url=url)])
    second = Client([Source("vllm", "m", api_key="second-token-000000", base_url=url)])
    async with first:
        async with second:
            assert filtered() == list(HTTP_LOGGERS)
            assert logged("first-token-0000000 second-token-000000") == (
                "saw [REDACTED] [REDACTED]"
            )
        assert logged("first-token-0000000 second-token-000000") == (
            "saw [REDACTED] second-token-000000"
        )
    assert filtered() == []
    assert logged("first-token-0000000") == "saw first-token-0000000"


def test_an_owner_collected_without_release_takes_its_keys_and_the_filter_away() -> None:
    class Owner:
        pass

    owner = Owner()
    redact_http_logs(owner, [KEY, None, ""])
    assert logged(KEY) == "saw [REDACTED]"
    del owner
    gc.collect()
    assert filtered() == []
    release_http_logs(object())  # an owner never registered: nothing happens
    assert filtered() == []
