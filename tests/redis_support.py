"""A real redis-server for the tests, and worker processes that call through it.

:class:`RedisServer` runs Debian's ``redis-server`` on 127.0.0.1 on a free port with a
temporary directory and no persistence. Without the binary the tests skip, or fail under
``POLYTHINK_TESTS_NO_SKIP=1`` (:mod:`tests.prerequisites`). :func:`spawn` starts
``python -m tests.redis_worker`` with a JSON plan; the worker prints one JSON object per
line.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

import anyio
import redis

from benchmarks.redisproc import RedisProcess
from polythink.middleware.base import CompleteNext, Passthrough, StreamNext
from polythink.types import Request, Response, StreamEvent
from tests.prerequisites import missing

ROOT = Path(__file__).resolve().parent.parent


class SimLatency(Passthrough):
    """Source middleware: the simulator waits ``seconds`` before answering this source's
    calls (``x-sim-latency``, added per attempt, after the cache: one cache entry with the
    other sources asking the same)."""

    def __init__(self, seconds: float) -> None:
        self.headers = {"x-sim-latency": str(seconds)}

    async def complete(self, request: Request, call_next: CompleteNext) -> Response:
        return await call_next(request.with_(extra_headers=self.headers))

    def stream(self, request: Request, call_next: StreamNext) -> AsyncGenerator[StreamEvent, None]:
        return call_next(request.with_(extra_headers=self.headers))


def redis_binary() -> str:
    """Return the path of ``redis-server``; skip (or fail, see :func:`missing`) without one."""
    found = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else None
    )
    if found is None:
        missing("redis-server is not installed (Debian package redis-server; .ci/run installs it)")
    return found


class RedisServer(RedisProcess):
    """One redis-server process on 127.0.0.1 in ``directory``; :meth:`stop` and
    :meth:`start` keep the port (see :class:`benchmarks.redisproc.RedisProcess`).

    With ``persist`` it keeps an append-only file (each write synced), so a server killed
    and started again comes back with its data, as a production one configured so would."""

    def __init__(self, directory: Path, *, persist: bool = False) -> None:
        super().__init__(directory, redis_binary(), persist=persist)

    def start(self) -> RedisServer:
        super().start()
        return self

    def budget_spent(self, key: str) -> int:
        """Return the nano-dollars a budget line (``name:scope``) holds in its window."""
        with redis.Redis(port=self.port) as client:
            value = client.hget(f"polythink:{{polythink-budget}}:{key}", "s")
        return int(value or 0)

    def command(self, *words: str) -> str | None:
        """Send one inline command and return the first line of the reply (``None``: down)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(" ".join(words).encode() + b"\r\n")
                return sock.recv(65536).split(b"\r\n", 1)[0].decode()
        except OSError:
            return None


def spawn(plan: dict[str, Any], worker: str = "tests.redis_worker") -> subprocess.Popen[str]:
    """Start a worker process running ``plan`` (see tests/redis_worker.py, or ``worker``)."""
    return subprocess.Popen(
        [sys.executable, "-m", worker, json.dumps(plan)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def go(process: subprocess.Popen[str]) -> None:
    """Let a worker started with ``wait_go`` begin."""
    assert process.stdin is not None
    process.stdin.write("go\n")
    process.stdin.flush()


def stop(process: subprocess.Popen[str]) -> None:
    """End the run of a worker started with ``stop_on_stdin`` (its calls in flight finish)."""
    assert process.stdin is not None
    process.stdin.write("stop\n")
    process.stdin.flush()


BUSY_SECONDS = 120.0
"""How long a test waits for what must happen (calls arriving, a fleet noticing Redis gone)
before it fails: far past what a quiet machine needs, for a CI runner shared with other work."""


async def until(condition: Callable[[], bool], what: str, at_least: float = 0.0) -> None:
    """Wait until ``condition()`` holds and ``at_least`` seconds have passed; fail after
    :data:`BUSY_SECONDS` naming ``what``. The phases of a multi-process test end when what
    they wait for has happened, not after a fixed time a busy machine may not keep to."""
    began = time.monotonic()
    while not (condition() and time.monotonic() - began >= at_least):
        assert time.monotonic() - began < BUSY_SECONDS, f"{what}: not within {BUSY_SECONDS} s"
        await anyio.sleep(0.02)


async def go_together(workers: list[subprocess.Popen[str]]) -> None:
    """Wait until every worker started with ``wait_go`` says it is ready (imports take a
    while, longer on a loaded machine), then let them all begin at once."""
    for worker in workers:
        assert worker.stdout is not None
        line = await anyio.to_thread.run_sync(worker.stdout.readline)
        assert '"ready"' in line, line
    for worker in workers:
        go(worker)


def results(process: subprocess.Popen[str], timeout: float = 60) -> list[dict[str, Any]]:
    """Wait for a worker and return its JSON lines; fail with its stderr if it failed, or
    if it lost Redis (it then fell back to its own limits, which these tests do not test)."""
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, err
    assert "does not answer" not in err, err
    return [json.loads(line) for line in out.splitlines() if line.strip()]
