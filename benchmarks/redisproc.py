"""A redis-server for the benchmarks: 127.0.0.1, a free port, no persistence.

:class:`RedisProcess` starts Debian's ``redis-server`` in a temporary directory; :meth:`stop`
and :meth:`start` keep the port, so a benchmark can take the server away and bring it back
under the clients' feet.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from types import TracebackType

__all__ = ["RedisProcess"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RedisProcess:
    """One redis-server process; ``with RedisProcess() as server: server.url``."""

    def __init__(self) -> None:
        self.binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.port = _free_port()
        self._directory = tempfile.TemporaryDirectory()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisProcess:
        """Start the server and wait until it answers PING.

        Raises:
            RuntimeError: it did not answer within 10 s.
        """
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                self._directory.name,
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                time.sleep(0.01)
        self.stop()
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        """Stop the server (its data goes with it)."""
        process, self.process = self.process, None
        if process is not None:
            process.terminate()
            process.wait(10)

    def __enter__(self) -> RedisProcess:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
        self._directory.cleanup()
