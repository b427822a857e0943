"""A tiny loopback HTTP server for tests that need a peer other than the simulator.

It answers every request with the same canned bytes and records each request's target and
headers, so a test can check what reached it (a proxy's absolute-form target, a key sent
where it should not go).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass, field


@dataclass
class Seen:
    """One request as the server received it."""

    target: str
    headers: dict[str, str] = field(default_factory=dict)


class CannedServer:
    """Serve ``answer`` (a whole HTTP/1.1 response) to every request on 127.0.0.1."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.seen: list[Seen] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                first, *lines = head.decode("latin-1").split("\r\n")
                headers = {
                    name.strip().lower(): value.strip()
                    for name, _, value in (line.partition(":") for line in lines if line)
                }
                self.seen.append(Seen(first.split(" ")[1], headers))
                await reader.readexactly(int(headers.get("content-length", "0")))
                writer.write(self.answer)
                await writer.drain()
        writer.close()

    def _run(self) -> None:
        async def start() -> None:
            server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]

        self._loop.run_until_complete(start())
        self._ready.set()
        self._loop.run_forever()

    def __enter__(self) -> CannedServer:
        self._thread.start()
        self._ready.wait(5)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
