"""A tiny loopback HTTP server for tests that need a peer other than the simulator.

It answers every request with the same canned bytes and records each request's target and
headers, so a test can check what reached it (a proxy's absolute-form target, a key sent
where it should not go).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterable
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
        self._server: asyncio.Server | None = None
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
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            self.port = self._server.sockets[0].getsockname()[1]

        self._loop.run_until_complete(start())
        self._ready.set()
        self._loop.run_forever()

    def __enter__(self) -> CannedServer:
        self._thread.start()
        self._ready.wait(5)
        return self

    def __exit__(self, *exc: object) -> None:
        async def shutdown() -> None:
            # Connection handlers still waiting for a next request end here, rather than
            # being reported by asyncio ("Task was destroyed but it is pending!") whenever
            # a later test happens to collect them.
            if self._server is not None:
                self._server.close()
            current = asyncio.current_task()
            handlers = [t for t in asyncio.all_tasks() if t is not current]
            for task in handlers:
                task.cancel()
            await asyncio.gather(*handlers, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self._loop.close()


class FloodServer:
    """Answer every request on 127.0.0.1 with ``head`` and then ``body``'s chunks as fast as
    the socket takes them, from a thread with a blocking socket (no event loop to share).

    ``body`` is an iterable of bytes, read anew for each connection (an endless generator
    function makes an endless answer). A connection ends when the client closes it, or when
    it has been sending for ``seconds`` (so a client that never stops reading fails its test
    rather than hanging it). ``sent`` counts the bytes of bodies written so far.
    """

    def __init__(
        self, head: bytes, body: Callable[[], Iterable[bytes]], seconds: float = 60.0
    ) -> None:
        self.head = head
        self.body = body
        self.seconds = seconds
        self.sent = 0
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def base_url(self, path: str = "/v1") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _accept(self) -> None:
        self._server.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.settimeout(30)
            received = b""
            while b"\r\n\r\n" not in received:
                data = conn.recv(65536)
                if not data:
                    return
                received += data
            head, _, rest = received.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            while len(rest) < length:
                data = conn.recv(65536)
                if not data:
                    return
                rest += data
            conn.sendall(self.head)
            until = time.monotonic() + self.seconds
            for chunk in self.body():
                if self._stop.is_set() or time.monotonic() > until:
                    return
                conn.sendall(chunk)
                self.sent += len(chunk)

    def __enter__(self) -> FloodServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._server.close()
        self._thread.join(5)
