"""Shared limits on Redis: adherence across worker processes, and the cost per call.

Run ``python -m benchmarks.shared_limits`` (needs ``redis-server`` on the PATH and the
``redis`` extra). It starts a redis-server on a free port with a temporary directory, the
simulator in its own process (``benchmarks/simproc.py``), and then:

1. **Adherence**: ``--workers`` processes, 8 tasks each, share one source limited to
   ``--rpm`` and ``--concurrency`` through Redis for ``--seconds``, against a simulator
   answering after 20 ms. Judged at the simulator over the span from its first call to its
   last: calls received against what the bucket allows (its full minute at the start plus
   the refill), the rate over the second half (after the initial burst) against the limit,
   and the most calls in flight at once.
2. **Cost per call**: in fresh processes, ``--calls`` sequential calls with RPM, TPM and a
   concurrency cap far above the load, in-process and on Redis: CPU time
   (``time.process_time``) and wall time per call, through the rate-limit layer alone (an
   inner handler that answers at once) and through a whole ``Client`` against the simulator;
   the median of ``--reps`` runs, alternating in-process and Redis.

Results go to ``benchmarks/results/shared-limits.json`` and a table on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.redisproc import RedisProcess
from benchmarks.simproc import SimProcess

__all__ = ["main"]

RESULTS = Path(__file__).resolve().parent / "results" / "shared-limits.json"
_TASKS = 8
_LATENCY = 0.02


def _worker(job: dict[str, Any], module: str = "benchmarks.shared_limits") -> dict[str, Any]:
    """Run ``job`` in a fresh ``python -m module worker JOB``; its last line of JSON."""
    process = subprocess.run(
        [sys.executable, "-m", module, "worker", json.dumps(job)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
        check=False,
    )
    if process.returncode != 0:
        raise RuntimeError(f"worker failed: {process.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(process.stdout.splitlines()[-1])
    return result


# --- worker side ------------------------------------------------------------------------


async def _load(job: dict[str, Any]) -> dict[str, Any]:
    import anyio

    from polythink import Client, Source
    from polythink.errors import PolythinkError, RateLimitedError

    source = Source(
        "openai",
        "gpt-5.5",
        api_key="sk-bench-shared",
        base_url=job["base_url"],
        rpm=job["rpm"],
        max_concurrency=job["concurrency"],
    )
    sent = refused = timed_out = 0
    async with Client([source], limits=job["redis"]) as client:
        await anyio.sleep(max(0.0, job["start_at"] - time.time()))

        async def task(i: int) -> None:
            nonlocal sent, refused, timed_out
            n = 0
            while (left := job["until"] - time.time()) > 0:
                n += 1
                prompt = [{"role": "user", "content": f"call {os.getpid()}-{i}-{n}"}]
                try:
                    await client.complete(prompt, timeout=left)
                except RateLimitedError:
                    refused += 1
                    return
                except PolythinkError:
                    # Admitted near the end, it ran out of its deadline in flight.
                    timed_out += 1
                    return
                sent += 1

        async with anyio.create_task_group() as tg:
            for i in range(_TASKS):
                tg.start_soon(task, i)
    return {"sent": sent, "refused": refused, "timed_out": timed_out}


async def _cost(job: dict[str, Any]) -> dict[str, Any]:
    from polythink import Client, Source
    from polythink.backends.local import LocalLimits, MonotonicClock
    from polythink.backends.redis import RedisLimitStore
    from polythink.middleware.ratelimit import RateLimitMiddleware
    from polythink.providers import get_provider
    from polythink.types import Message, Request, Response, Usage

    limits = {"rpm": 10_000_000, "tpm": 10_000_000_000, "max_concurrency": 64}
    source = Source(
        "openai", "gpt-5.5", api_key="sk-bench-cost", base_url=job["base_url"], **limits
    )
    calls = job["calls"]
    if job["path"] == "layer":
        store = RedisLimitStore(job["redis"]) if job["redis"] else None
        backend = None
        if store is not None:
            backend = store.for_source(
                "openai",
                source.endpoint,
                "sk-bench-cost",
                rpm=source.rpm,
                tpm=source.tpm,
                max_concurrency=source.max_concurrency,
                fallback=LocalLimits(source.rpm, source.tpm, 64, MonotonicClock()),
            )
        layer = RateLimitMiddleware(source, 0, get_provider("openai"), backend=backend)
        answer = Response(
            text="ok",
            reasoning=None,
            tool_calls=[],
            finish_reason="stop",
            usage=Usage(input_tokens=20, output_tokens=5),
            model="gpt-5.5",
            provider="openai",
            source_index=0,
            message=Message(role="assistant", content="ok"),
        )

        async def inner(request: Request) -> Response:
            return answer

        request = Request(messages=(Message(role="user", content="x" * 80),), max_tokens=100)
        for _ in range(50):
            await layer.complete(request, inner)
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(calls):
            await layer.complete(request, inner)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        if store is not None:
            await store.aclose()
    else:
        async with Client([source], limits=job["redis"]) as client:
            for i in range(50):
                await client.complete([{"role": "user", "content": f"warm {i}"}], max_tokens=100)
            cpu, wall = time.process_time(), time.perf_counter()
            for i in range(calls):
                await client.complete([{"role": "user", "content": f"call {i}"}], max_tokens=100)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"cpu_us": cpu / calls * 1e6, "latency_us": wall / calls * 1e6}


def _run_worker(kind: str, job: dict[str, Any]) -> None:
    import anyio

    result = anyio.run(_load if kind == "load" else _cost, job)
    sys.stdout.write(json.dumps(result) + "\n")


# --- orchestrator -----------------------------------------------------------------------


def _adherence(sim: SimProcess, url: str, args: argparse.Namespace) -> dict[str, Any]:
    control = httpx.Client(base_url=sim.root)
    control.post("/_bench/settings", json={"latency": _LATENCY})
    control.post("/_bench/reset")
    start_at = time.time() + 5.0
    job = {
        "redis": url,
        "base_url": f"{sim.root}/openai/v1",
        "rpm": args.rpm,
        "concurrency": args.concurrency,
        "start_at": start_at,
        "until": start_at + args.seconds,
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "benchmarks.shared_limits", "load", json.dumps(job)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
        )
        for _ in range(args.workers)
    ]
    workers = []
    for process in procs:
        out, err = process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"load worker failed: {err[-2000:]}")
        workers.append(json.loads(out.splitlines()[-1]))
    stats = control.get("/_bench/stats").json()
    control.post("/_bench/settings", json={"latency": 0.0})
    arrivals = sorted(stats["arrivals"])
    first, last = arrivals[0], arrivals[-1]
    # Judged over the span the simulator saw: the bucket allows its full minute at the first
    # call plus the refill until the last; the second half of the span is past the burst.
    span = last - first
    half = span / 2
    second_half = [t for t in arrivals if t >= first + half]
    allowed = args.rpm + args.rpm / 60 * span
    return {
        "workers": args.workers,
        "tasks_per_worker": _TASKS,
        "seconds": args.seconds,
        "span_seconds": span,
        "rpm": args.rpm,
        "max_concurrency": args.concurrency,
        "received": stats["requests"],
        "allowed": allowed,
        "received_over_allowed": stats["requests"] / allowed,
        "steady_rpm": len(second_half) / half * 60,
        "steady_rpm_over_limit": len(second_half) / half * 60 / args.rpm,
        "max_in_flight": stats["max_in_flight"],
        "per_second": [
            sum(1 for t in arrivals if first + i <= t < first + i + 1) for i in range(int(span) + 1)
        ],
        "per_worker_sent": [w["sent"] for w in workers],
    }


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {name: statistics.median(run[name] for run in runs) for name in runs[0]}


def _costs(sim: SimProcess, url: str, calls: int, reps: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    base = {"base_url": f"{sim.root}/openai/v1", "calls": calls}
    for path in ("layer", "client"):
        runs: dict[str, list[dict[str, Any]]] = {"local": [], "redis": []}
        for _ in range(reps):
            runs["local"].append(_worker({**base, "path": path, "redis": None}))
            runs["redis"].append(_worker({**base, "path": path, "redis": url}))
        local, shared = _median(runs["local"]), _median(runs["redis"])
        out[path] = {
            "in_process": local,
            "redis": shared,
            "added_cpu_us": shared["cpu_us"] - local["cpu_us"],
            "added_latency_us": shared["latency_us"] - local["latency_us"],
        }
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the scenario (or, with ``load``/``worker`` as first argument, one worker)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("load", "worker"):
        _run_worker("load" if argv[0] == "load" else "cost", json.loads(argv[1]))
        return 0
    parser = argparse.ArgumentParser(prog="python -m benchmarks.shared_limits")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rpm", type=float, default=600.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    with RedisProcess() as server, SimProcess() as sim:
        url = server.url
        result = {
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "cpus": os.cpu_count(),
            "load_average_before": os.getloadavg(),
            "adherence": _adherence(sim, url, args),
            "cost": _costs(sim, url, args.calls, args.reps),
            "load_average_after": os.getloadavg(),
        }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    a = result["adherence"]
    print(
        f"adherence: {a['workers']} workers x {a['tasks_per_worker']} tasks, {a['seconds']:g} s, "
        f"limit {a['rpm']:g} rpm / {a['max_concurrency']} in flight\n"
        f"  received {a['received']} of {a['allowed']:g} allowed "
        f"({a['received_over_allowed']:.3f}); steady {a['steady_rpm']:.1f} rpm "
        f"({a['steady_rpm_over_limit']:.3f}); max in flight {a['max_in_flight']}"
    )
    for path, cost in result["cost"].items():
        print(
            f"cost per call ({path}): in-process {cost['in_process']['cpu_us']:.0f} us CPU / "
            f"{cost['in_process']['latency_us']:.0f} us wall; Redis "
            f"{cost['redis']['cpu_us']:.0f} us CPU / {cost['redis']['latency_us']:.0f} us wall; "
            f"added {cost['added_cpu_us']:.0f} us CPU, {cost['added_latency_us']:.0f} us wall"
        )
    print(f"results: {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
