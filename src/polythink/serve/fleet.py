"""Several gateway workers on one port: gunicorn's arbiter running aiohttp's worker.

``polythink serve --workers N`` (or ``[serve] workers = N``) starts gunicorn's master, which
binds the port once and forks ``N`` workers that accept on it, each running the gateway's
application in its own event loop (``aiohttp.GunicornWebWorker``). Why gunicorn rather than
``SO_REUSEPORT`` and a loop of our own: the arbiter is a well-kept process manager that
already does what a fleet needs: it replaces a worker that dies (killed, out of memory,
stuck past its heartbeat), stops them gracefully on SIGTERM (each stops accepting, finishes
its calls and streams for ``drain_timeout`` seconds, then ends the streams still open with an
error event in their format) and reloads on SIGHUP; and one listening socket shared by every
worker loses no connection when a worker dies, where with ``SO_REUSEPORT`` the connections
the kernel had queued for a dead worker's own socket are reset.

The workers share what must be shared through the ``limits`` and ``cache`` Redis servers
when the file names them: the sources' rate limits, the spend budgets (tenants' included),
the tenants' limits, the cache and the coalescing of identical calls. Without Redis each
worker counts alone (N workers may send N times a limit).

Each worker has a slot, ``0`` to ``N-1`` (a replacement takes the slot of the worker it
replaces): it serves its own metrics on ``worker-<slot>.sock`` in the fleet's directory
(a temporary directory, removed when the master exits), and ``/metrics`` on any worker
gathers every worker's (see :mod:`polythink.serve.metrics`).

Needs gunicorn (``pip install 'polythink[serve]'``).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["SLOT_VARIABLE", "run_fleet"]

SLOT_VARIABLE = "POLYTHINK_SERVE_SLOT"
"""The environment variable a worker reads its slot from (set after the fork)."""

_HEARTBEAT = 30
"""Seconds a worker may go without telling the master it lives before it is replaced
(aiohttp's worker tells it every second from its event loop, so only a stuck loop misses)."""


def _slot_of(worker: Any) -> int:
    return int(getattr(worker, "polythink_slot", -1))


def run_fleet(config: str | Path | None, *, host: str, port: int, workers: int) -> int:
    """Run ``workers`` gateway workers on ``host:port`` under gunicorn until SIGINT or
    SIGTERM (graceful: see the module docstring); return the exit code.

    Raises:
        ImportError: gunicorn is not installed (the message says how to install it).
        ValueError: a configuration the gateway refuses (read before any worker starts).
    """
    try:
        from gunicorn.app.base import BaseApplication  # type: ignore[import-untyped]
    except ImportError as exc:
        raise ImportError(
            "--workers above 1 runs the workers under gunicorn: pip install 'polythink[serve]'"
        ) from exc
    from polythink.serve.config import load_config

    settings = load_config(config).settings
    # Loaded once, before the fork: every worker starts with them.
    import aiohttp.worker  # noqa: F401

    import polythink.serve.app  # noqa: F401

    with contextlib.suppress(ImportError):
        import opentelemetry.exporter.prometheus
        import opentelemetry.sdk.metrics  # noqa: F401
        import redis.asyncio  # noqa: F401
    directory = tempfile.mkdtemp(prefix="polythink-serve-")
    path = str(config) if config is not None else None

    def pre_fork(server: Any, worker: Any) -> None:
        taken = {_slot_of(w) for w in server.WORKERS.values()}
        worker.polythink_slot = next(i for i in itertools.count() if i not in taken)

    def post_fork(server: Any, worker: Any) -> None:
        os.environ[SLOT_VARIABLE] = str(_slot_of(worker))

    def child_exit(server: Any, worker: Any) -> None:
        from polythink.serve.metrics import worker_socket

        with contextlib.suppress(OSError):
            worker_socket(directory, _slot_of(worker)).unlink()

    def when_ready(server: Any) -> None:
        root = f"http://{host}:{port}"
        print(
            f"polythink serve listening on {root} with {workers} workers (gunicorn): OpenAI "
            f"base URL {root}/v1, Anthropic base URL {root} (Ctrl-C stops)",
            flush=True,
        )

    def on_exit(server: Any) -> None:
        shutil.rmtree(directory, ignore_errors=True)

    async def worker_app() -> Any:
        from polythink.serve.app import create_app, runner_for

        loaded = load_config(path)
        slot = int(os.environ.get(SLOT_VARIABLE, "0"))
        return runner_for(create_app(loaded, fleet=(directory, slot)), loaded.settings)

    options = {
        "bind": [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"],
        "workers": workers,
        "worker_class": "aiohttp.GunicornWebWorker",
        "graceful_timeout": math.ceil(settings.drain_timeout) + 5,
        "timeout": _HEARTBEAT,
        "accesslog": None,
        "errorlog": "-",
        "loglevel": "warning",
        "proc_name": "polythink-serve",
        "pre_fork": pre_fork,
        "post_fork": post_fork,
        "child_exit": child_exit,
        "when_ready": when_ready,
        "on_exit": on_exit,
    }

    class Fleet(BaseApplication):  # type: ignore[misc]
        def load_config(self) -> None:
            for key, value in options.items():
                self.cfg.set(key, value)

        def load(self) -> Any:
            return worker_app

    try:
        Fleet().run()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return 0
