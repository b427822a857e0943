"""Both HTTP layers send through the proxy the environment names, as httpx's own client does."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator

import pytest

from polythink import Client, Source

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


class _Proxy:
    """A loopback forward proxy that answers every request itself and records its target."""

    def __init__(self) -> None:
        self.targets: list[str] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                while True:
                    head = await reader.readuntil(b"\r\n\r\n")
                    lines = head.decode("latin-1").split("\r\n")
                    self.targets.append(lines[0].split(" ")[1])
                    length = 0
                    for line in lines[1:]:
                        name, _, value = line.partition(":")
                        if name.strip().lower() == "content-length":
                            length = int(value)
                    await reader.readexactly(length)
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                        b"content-length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER)
                    )
                    await writer.drain()
            writer.close()

        async def start() -> None:
            server = await asyncio.start_server(handle, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]

        self._loop.run_until_complete(start())
        self._ready.set()
        self._loop.run_forever()

    def __enter__(self) -> _Proxy:
        self._thread.start()
        self._ready.wait(5)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


@pytest.fixture
def proxy() -> Iterator[_Proxy]:
    with _Proxy() as running:
        yield running


@pytest.mark.anyio
@pytest.mark.parametrize("http", ["httpx", "aiohttp"])
async def test_the_proxy_from_the_environment_carries_the_call(
    proxy: _Proxy, http: str, monkeypatch: pytest.MonkeyPatch
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
    assert proxy.targets == ["http://llm.internal.example/v1/chat/completions"]
