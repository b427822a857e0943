"""Spend budgets: what an active budget costs per call, in this process and on Redis.

Run ``python -m benchmarks.budgets`` (needs ``redis-server`` on the PATH and the ``redis``
and ``cost`` extras). It starts a redis-server on a free port with a temporary directory and
the simulator in its own process (``benchmarks/simproc.py``), then, in fresh processes,
makes ``--calls`` sequential calls per measurement and takes the median of ``--reps`` runs,
the variants of one comparison alternating:

1. **The budget layer alone**, around an inner handler that answers at once with a priced
   usage: the layer's reservation, step-down decision and correction against one daily
   budget counted in this process, then on Redis. The baseline is the same request passed
   straight to the handler.
2. **A whole ``Client``** against the simulator: without budgets, then with one daily budget
   counted in this process; and with ``limits="redis://…"`` (the limits already on Redis),
   without budgets, then with the budget on Redis. So each added figure is what the budget
   alone adds.

CPU time is ``time.process_time``, latency ``time.perf_counter``, both per call. Results go
to ``benchmarks/results/budgets.json`` and a table on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.redisproc import RedisProcess
from benchmarks.shared_limits import _median, _worker
from benchmarks.simproc import SimProcess

__all__ = ["main"]

RESULTS = Path(__file__).resolve().parent / "results" / "budgets.json"
_WARM = 50


# --- worker side ------------------------------------------------------------------------


async def _layer(job: dict[str, Any]) -> tuple[float, float]:
    from polythink import Budget, Source
    from polythink.backends.local import LocalBudgets
    from polythink.backends.redis import RedisLimitStore
    from polythink.budgets import account_id
    from polythink.middleware.budget import BudgetMiddleware
    from polythink.middleware.reasoning import ReasoningMiddleware
    from polythink.providers import get_provider
    from polythink.types import Effort, Message, Request, Response, Usage

    source = Source("openai", "gpt-5.5", api_key="sk-bench-budget", base_url=job["base_url"])
    profile = get_provider("openai")
    store = RedisLimitStore(job["redis"]) if job["backend"] == "redis" else None
    backend: Any = store.budgets() if store is not None else LocalBudgets()
    budget = Budget(1000.0, name=f"bench-{os.getpid()}")
    layer = BudgetMiddleware(
        [budget],
        source,
        0,
        profile,
        ReasoningMiddleware(source, 0, profile),
        backend,
        account=account_id("openai", source.endpoint, "sk-bench-budget"),
    )
    answer = Response(
        text="ok",
        reasoning=None,
        tool_calls=[],
        finish_reason="stop",
        usage=Usage(input_tokens=30, output_tokens=60, reasoning_tokens=40),
        model="gpt-5.5",
        provider="openai",
        source_index=0,
        message=Message(role="assistant", content="ok"),
    )

    async def inner(request: Request) -> Response:
        return answer

    request = Request(
        messages=(Message(role="user", content="x" * 80),),
        max_tokens=400,
        reasoning_effort=Effort.HIGH,
    )

    async def once() -> Response:
        if job["backend"] == "none":
            return await inner(request)
        return await layer.complete(request, inner)

    for _ in range(_WARM):
        await once()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(job["calls"]):
        await once()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if store is not None:
        await store.aclose()
    return cpu, wall


async def _client(job: dict[str, Any]) -> tuple[float, float]:
    from polythink import Budget, Client, Source

    source = Source("openai", "gpt-5.5", api_key="sk-bench-budget", base_url=job["base_url"])
    budgets = [Budget(1000.0, name=f"bench-{os.getpid()}")] if job["budget"] else []
    async with Client([source], limits=job["redis"], budgets=budgets) as client:
        for i in range(_WARM):
            await client.complete(
                [{"role": "user", "content": f"warm {i}"}], reasoning_effort="high", max_tokens=400
            )
        cpu, wall = time.process_time(), time.perf_counter()
        for i in range(job["calls"]):
            await client.complete(
                [{"role": "user", "content": f"call {i}"}], reasoning_effort="high", max_tokens=400
            )
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu, wall


def _run_worker(job: dict[str, Any]) -> None:
    import anyio

    cpu, wall = anyio.run(_layer if job["path"] == "layer" else _client, job)
    calls = job["calls"]
    sys.stdout.write(json.dumps({"cpu_us": cpu / calls * 1e6, "latency_us": wall / calls * 1e6}))
    sys.stdout.write("\n")


# --- orchestrator -----------------------------------------------------------------------


def _compare(jobs: dict[str, dict[str, Any]], reps: int) -> dict[str, dict[str, float]]:
    """Run each variant ``reps`` times, alternating; the median of each."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in jobs}
    for _ in range(reps):
        for name, job in jobs.items():
            runs[name].append(_worker(job, "benchmarks.budgets"))
    return {name: _median(found) for name, found in runs.items()}


def _added(base: dict[str, float], with_budget: dict[str, float]) -> dict[str, float]:
    return {
        "added_cpu_us": with_budget["cpu_us"] - base["cpu_us"],
        "added_latency_us": with_budget["latency_us"] - base["latency_us"],
        "cpu_ratio": with_budget["cpu_us"] / base["cpu_us"],
        "latency_ratio": with_budget["latency_us"] / base["latency_us"],
    }


def main(argv: list[str] | None = None) -> int:
    """Run the measurements (or, with ``worker`` as first argument, one worker)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "worker":
        _run_worker(json.loads(argv[1]))
        return 0
    parser = argparse.ArgumentParser(prog="python -m benchmarks.budgets")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    with RedisProcess() as server, SimProcess() as sim:
        url = server.url
        base = {"base_url": f"{sim.root}/openai/v1", "calls": args.calls, "redis": url}
        layer = _compare(
            {
                name: {**base, "path": "layer", "backend": name}
                for name in ("none", "local", "redis")
            },
            args.reps,
        )
        client = _compare(
            {
                "local": {**base, "path": "client", "redis": None, "budget": False},
                "local_budget": {**base, "path": "client", "redis": None, "budget": True},
                "redis": {**base, "path": "client", "budget": False},
                "redis_budget": {**base, "path": "client", "budget": True},
            },
            args.reps,
        )
    result = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "calls": args.calls,
        "reps": args.reps,
        "layer": {
            **layer,
            "in_process": _added(layer["none"], layer["local"]),
            "on_redis": _added(layer["none"], layer["redis"]),
        },
        "client": {
            **client,
            "in_process": _added(client["local"], client["local_budget"]),
            "on_redis": _added(client["redis"], client["redis_budget"]),
        },
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for path in ("layer", "client"):
        for where in ("in_process", "on_redis"):
            added = result[path][where]
            print(
                f"{path:6} budget {where.replace('_', ' '):10}: +{added['added_cpu_us']:.0f} us "
                f"CPU ({added['cpu_ratio']:.2f}x), +{added['added_latency_us']:.0f} us wall "
                f"({added['latency_ratio']:.2f}x) per call"
            )
    print(f"results: {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
