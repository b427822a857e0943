"""The simulator in its own process, with a small control API for the benchmark.

Run as ``python -m benchmarks.simproc [--port N]``: it serves
:class:`polythink.simulator.server.SimulatorServer` on 127.0.0.1 and prints one line,
``listening PORT``, once it accepts connections. Besides the provider routes it answers:

- ``POST /_bench/settings`` ``{"latency": s, "chunk_delay": s, "answer_words": n}``: change
  the live :class:`~polythink.simulator.server.Settings` (seconds, words);
- ``POST /_bench/faults`` ``{"rate": p, "mix": [{"status": 503}, {"status": 429,
  "retry_after_ms": 20}]}``: inject faults drawn at rate ``p`` through the simulator's fault
  plan (``polythink.simulator.faults``); ``{"rate": 0}`` removes it. A build without fault
  injection answers 501;
- ``POST /_bench/reset``: forget the statistics;
- ``GET /_bench/stats``: requests, most requests in flight at once, arrival times (monotonic
  seconds of this process) and faults injected, control requests left out of each (a
  benchmark reading the statistics mid-run while 8 calls are in flight reads 8, not 9).

:class:`SimProcess` starts and stops that process from the benchmark's orchestrator.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import os
import signal
import subprocess
import sys
from types import TracebackType
from typing import Any

__all__ = ["DEFAULT_SETTINGS", "SimProcess", "main"]

DEFAULT_SETTINGS: dict[str, float] = {"latency": 0.0, "chunk_delay": 0.0, "answer_words": 12}
"""The settings every job starts from (``POST /_bench/settings``): no delay, 12-word answers."""

_PREFIX = "/_bench/"


class _Control:
    """A wire module for ``/_bench/*``: reads and changes the server it is installed in."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.faults_module: Any = None
        with contextlib.suppress(ModuleNotFoundError):
            self.faults_module = importlib.import_module("polythink.simulator.faults")

    def matches(self, path: str) -> bool:
        return path.startswith(_PREFIX)

    async def handle(self, request: Any, response: Any) -> None:
        action = request.path[len(_PREFIX) :]
        stats = self.server.stats
        settings = self.server.settings
        if action == "stats":
            plan = settings.faults
            injected = dict(getattr(plan, "injected", {}) or {})
            arrivals = list(stats.arrivals)
            await response.send_json(
                200,
                {
                    "requests": stats.requests,
                    "max_in_flight": self.server.most_calls,
                    "connections": stats.connections,
                    "arrivals": arrivals,
                    "faults_injected": injected,
                },
            )
        elif action == "reset":
            stats.reset()
            self.server.most_calls = self.server.calls
            plan = settings.faults
            if plan is not None and hasattr(plan, "injected"):
                plan.injected.clear()
            await response.send_json(200, {"ok": True})
        elif action == "settings":
            for name, value in (request.json() or {}).items():
                if not hasattr(settings, name) or name == "faults":
                    await response.send_json(400, {"error": f"unknown setting {name!r}"})
                    return
                setattr(settings, name, value)
            await response.send_json(200, {"ok": True})
        elif action == "faults":
            await self._faults(request, response)
        else:
            await response.send_json(404, {"error": f"unknown control {action!r}"})

    async def _faults(self, request: Any, response: Any) -> None:
        spec = request.json() or {}
        rate = float(spec.get("rate", 0.0))
        if rate == 0.0:
            self.server.settings.faults = None
            await response.send_json(200, {"ok": True})
            return
        if self.faults_module is None:
            await response.send_json(
                501, {"error": "this build of the simulator has no fault injection"}
            )
            return
        fault = self.faults_module.Fault
        mix = [fault.http(int(f.pop("status")), **f) for f in spec.get("mix", [])]
        self.server.settings.faults = self.faults_module.FaultPlan(
            rate=rate, mix=mix, seed=int(spec.get("seed", 0))
        )
        await response.send_json(200, {"ok": True})


async def _serve(port: int) -> None:
    from polythink.simulator.server import SimulatorServer

    class Server(SimulatorServer):
        """The simulator, with ``/_bench/*`` answered before latency and faults apply.

        The server counts every request it reads; a control request is taken out of the
        count and the arrivals again here, and ``calls`` and ``most_calls`` count the
        provider calls in flight now and at most since the last reset.
        """

        def __init__(self) -> None:
            super().__init__()
            self.control = _Control(self)
            self.calls = 0
            self.most_calls = 0

        async def _dispatch(self, request: Any, response: Any) -> None:
            if self.control.matches(request.path):
                # Counted as it was read, just before this: it is the last arrival.
                self.stats.requests -= 1
                self.stats.arrivals.pop()
                await self.control.handle(request, response)
                return
            self.calls += 1
            self.most_calls = max(self.most_calls, self.calls)
            try:
                await super()._dispatch(request, response)
            finally:
                self.calls -= 1

    server = Server()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    bound = await server.start("127.0.0.1", port)
    print(f"listening {bound}", flush=True)
    try:
        await stop.wait()
    finally:
        await server.close()


def main(argv: list[str] | None = None) -> None:
    """Serve until SIGINT or SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.simproc")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    asyncio.run(_serve(args.port))


class SimProcess:
    """Start the simulator process and stop it (workers use its control API themselves).

    Raises:
        RuntimeError: from :meth:`start` when the process exits or prints something other
            than its ``listening PORT`` line.
    """

    def __init__(self) -> None:
        self.process: subprocess.Popen[str] | None = None
        self.port = 0

    @property
    def root(self) -> str:
        """``http://127.0.0.1:PORT``; a provider's base URL is ``{root}/{provider}/v1``."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> SimProcess:
        """Start the process and wait for its ``listening PORT`` line."""
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.simproc"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=_package_parent(),
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("listening "):
            self.stop()
            raise RuntimeError(f"the simulator did not start: {line.strip() or 'no output'}")
        self.port = int(line.split()[1])
        return self

    def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL after 10 s)."""
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None

    def __enter__(self) -> SimProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _package_parent() -> str:
    """The directory that holds the ``benchmarks`` package (the child's import root)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


if __name__ == "__main__":
    main()
