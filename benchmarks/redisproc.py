"""A redis-server for the benchmarks and tests: 127.0.0.1, a free port, persistence optional.

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
from pathlib import Path
from types import TracebackType

__all__ = ["RedisProcess"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RedisProcess:
    """One redis-server process; ``with RedisProcess() as server: server.url``.

    Args:
        directory: its working directory (``None``: a temporary one, removed on exit).
        binary: the ``redis-server`` to run (``None``: the one on the PATH).
        persist: keep an append-only file, each write synced, so a server stopped and started
            again comes back with its data.
    """

    def __init__(
        self, directory: Path | None = None, binary: str | None = None, *, persist: bool = False
    ) -> None:
        self.binary = binary or shutil.which("redis-server") or "/usr/bin/redis-server"
        self.persist = persist
        self.port = _free_port()
        self._temporary = tempfile.TemporaryDirectory() if directory is None else None
        self.directory = directory or Path(self._temporary.name)  # type: ignore[union-attr]
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
                str(self.directory),
                "--save",
                "",
                "--appendonly",
                "yes" if self.persist else "no",
                "--appendfsync",
                "always",
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
        if self._temporary is not None:
            self._temporary.cleanup()
