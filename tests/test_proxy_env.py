"""Both HTTP layers send through the proxy the environment names, as httpx's own client does."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from polythink import Client, Source
from tests.loopback import CannedServer

ANSWER = json.dumps(
    {
        "id": "c1",
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "via proxy"},
                "finish_reason": "stop",
            }
        ],
    }
).encode()


@pytest.fixture
def proxy() -> Iterator[CannedServer]:
    # A forward proxy that answers every request itself and records its target.
    answer = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
        % (len(ANSWER), ANSWER)
    )
    with CannedServer(answer) as running:
        yield running


@pytest.mark.anyio
@pytest.mark.parametrize("http", ["httpx", "aiohttp"])
async def test_the_proxy_from_the_environment_carries_the_call(
    proxy: CannedServer, http: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "http_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{proxy.port}")
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    source = Source(
        "openai",
        "gpt-4o",
        api_key="sk-test-0000000000000000",
        base_url="http://llm.internal.example/v1",
        max_retries=0,
    )
    async with Client([source], http=http) as client:  # type: ignore[arg-type]
        answer = await client.complete([{"role": "user", "content": "hi"}])
    assert answer.text == "via proxy"
    assert [seen.target for seen in proxy.seen] == [
        "http://llm.internal.example/v1/chat/completions"
    ]
