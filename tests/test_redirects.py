"""Redirects are never followed: a key sent in x-api-key or x-goog-api-key would reach the
other host (httpx strips only Authorization on a cross-origin redirect)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from polythink import Client, Source
from polythink.errors import RequestRejectedError
from tests.loopback import CannedServer

SECRET = "sk-ant-test-0000000000000000"


REDIRECT = (
    b"HTTP/1.1 307 Temporary Redirect\r\n"
    b"location: http://127.0.0.2:9/elsewhere\r\ncontent-length: 0\r\n\r\n"
)


@pytest.fixture
def server() -> Iterator[CannedServer]:
    with CannedServer(REDIRECT) as running:
        yield running


@pytest.mark.anyio
@pytest.mark.parametrize("http", ["httpx", "aiohttp"])
@pytest.mark.parametrize("stream", [False, True])
async def test_a_redirect_is_an_error_and_is_not_followed(
    server: CannedServer, http: str, stream: bool
) -> None:
    source = Source(
        "anthropic",
        "claude-sonnet-4-5",
        api_key=SECRET,
        base_url=f"http://127.0.0.1:{server.port}/v1",
        max_retries=0,
    )

    async def call(client: Client) -> None:
        if stream:
            async for _event in client.stream([{"role": "user", "content": "hi"}]):
                pass
        else:
            await client.complete([{"role": "user", "content": "hi"}])

    async with Client([source], http=http) as client:  # type: ignore[arg-type]
        with pytest.raises(RequestRejectedError) as caught:
            await call(client)
    error = caught.value
    assert (error.status_code, error.error_type) == (307, "redirect")
    assert "redirected to http://127.0.0.2:9/elsewhere" in error.message
    assert "set the source's base_url to the final endpoint" in error.message
    assert len(server.seen) == 1
    assert server.seen[0].headers["x-api-key"] == SECRET


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_a_callers_http_client_that_follows_redirects_does_not_follow_ours(
    server: CannedServer, stream: bool
) -> None:
    source = Source(
        "gemini",
        "gemini-2.5-flash",
        api_key=SECRET,
        base_url=f"http://127.0.0.1:{server.port}/v1beta",
        max_retries=0,
    )

    async def call(client: Client) -> None:
        if stream:
            async for _event in client.stream([{"role": "user", "content": "hi"}]):
                pass
        else:
            await client.complete([{"role": "user", "content": "hi"}])

    mine = httpx.AsyncClient(follow_redirects=True)
    async with mine, Client([source], http_client=mine) as client:
        with pytest.raises(RequestRejectedError) as caught:
            await call(client)
    assert (caught.value.status_code, caught.value.error_type) == (307, "redirect")
    assert len(server.seen) == 1
    assert server.seen[0].headers["x-goog-api-key"] == SECRET
