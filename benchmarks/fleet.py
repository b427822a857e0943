"""Many worker processes on one Redis: what they pay for repeated calls.

Run ``python -m benchmarks.fleet`` (needs ``redis-server`` on the PATH and the ``redis``
extra). It starts a redis-server on a free port and the simulator in its own process
(``benchmarks/simproc.py``), then:

**Coalescing** (``--processes`` × ``--prompts``): every prompt is asked twice, half of them
as streams; the 2 × prompts asks are shuffled (fixed seed) and dealt round-robin to the
processes, which run them with 8 tasks each against a simulator answering after
``--latency`` seconds, all sharing ``Client(cache=RedisCache(url, …))``. Measured at the
simulator: the upstream calls, against the prompts (each needs one). Run twice in one run,
alternating: with the cache's cross-process coalescing off (``coalesce=False``: every
process that misses calls) and on (the default).

**Outage** (``--outage``): the same processes share one source limited to ``--rpm`` and
``--concurrency`` through Redis for ``--seconds``, calling as fast as the limits let them
(8 tasks each; a refused call waits out its ``retry_after``, at most 0.5 s, and goes on),
against a simulator answering after 0.2 s. The redis-server is stopped ``--kill-at`` seconds
in and started again (empty) at ``--restart-at``. Measured at the simulator, per phase (Redis
up, the first 0.5 s without it, without it, the first 0.5 s with it again, with it): the
most calls in flight at once and the calls received; over the run, the calls received
against what the limit allows (the bucket's minute at the first call plus its refill until
the last). ``--label`` names the build measured (run it with another build's ``src`` on
``PYTHONPATH`` for a before/after).

Results go to ``benchmarks/results/fleet.json`` (the outage scenario to
``benchmarks/results/fleet-outage-<label>.json``) and a table on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import random
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

RESULTS = Path(__file__).resolve().parent / "results" / "fleet.json"
_TASKS = 8
_ROOT = Path(__file__).resolve().parent.parent


# --- worker side ------------------------------------------------------------------------


async def _coalesce(job: dict[str, Any]) -> dict[str, Any]:
    from contextlib import aclosing

    import anyio

    from polythink import Client, Source
    from polythink.backends.redis import RedisCache

    source = Source("openai", "gpt-5.5", api_key="sk-bench-fleet", base_url=job["base_url"])
    cache = RedisCache(job["redis"], coalesce=job["coalesce"])
    asks: list[list[Any]] = list(job["asks"])
    latencies: list[float] = []
    hits = 0
    async with Client([source], cache=cache) as client:
        await anyio.sleep(max(0.0, job["start_at"] - time.time()))

        async def task() -> None:
            nonlocal hits
            answer: Any = None
            while asks:
                prompt, streamed = asks.pop(0)
                messages = [{"role": "user", "content": f"{job['tag']} prompt {prompt}"}]
                started = time.perf_counter()
                if streamed:
                    async with aclosing(client.stream(messages)) as events:
                        async for event in events:
                            answer = event.response or answer
                else:
                    answer = await client.complete(messages)
                latencies.append(time.perf_counter() - started)
                hits += answer.cache_hit

        async with anyio.create_task_group() as tg:
            for _ in range(_TASKS):
                tg.start_soon(task)
    return {"calls": len(latencies), "hits": hits, "latencies": latencies}


async def _outage(job: dict[str, Any]) -> dict[str, Any]:
    import anyio

    from polythink import Client, Source
    from polythink.backends.redis import RedisLimitStore
    from polythink.errors import PolythinkError, RateLimitedError

    source = Source(
        "openai",
        "gpt-5.5",
        api_key="sk-bench-outage",
        base_url=job["base_url"],
        rpm=job["rpm"],
        max_concurrency=job["concurrency"],
    )
    # A loaded machine may starve a worker past the default 0.5 s socket timeout, which
    # would look like an outage to that worker alone; this scenario times a real one.
    limits = RedisLimitStore(job["redis"], retry_interval=job["retry_interval"], socket_timeout=2.0)
    sent = refused = failed = 0
    async with Client([source], limits=limits) as client:
        await anyio.sleep(max(0.0, job["start_at"] - time.time()))

        async def task(i: int) -> None:
            nonlocal sent, refused, failed
            n = 0
            while (left := job["until"] - time.time()) > 0:
                n += 1
                prompt = [{"role": "user", "content": f"outage {os.getpid()}-{i}-{n}"}]
                try:
                    await client.complete(prompt, timeout=left)
                except RateLimitedError as exc:
                    refused += 1
                    await anyio.sleep(min(exc.retry_after or 0.5, 0.5, max(0.0, left)))
                    continue
                except PolythinkError:
                    failed += 1
                    continue
                sent += 1

        async with anyio.create_task_group() as tg:
            for i in range(_TASKS):
                tg.start_soon(task, i)
    return {"sent": sent, "refused": refused, "failed": failed}


def _run_worker(kind: str, job: dict[str, Any]) -> None:
    import anyio

    result = anyio.run(_coalesce if kind == "coalesce" else _outage, job)
    sys.stdout.write(json.dumps(result) + "\n")


def _spawn(kind: str, job: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "benchmarks.fleet", kind, json.dumps(job)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=_ROOT,
    )


def _collect(processes: list[subprocess.Popen[str]]) -> list[dict[str, Any]]:
    out = []
    for process in processes:
        stdout, stderr = process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"worker failed: {stderr[-2000:]}")
        out.append(json.loads(stdout.splitlines()[-1]))
    return out


# --- orchestrator -----------------------------------------------------------------------


def _deal(processes: int, prompts: int, seed: int) -> list[list[list[Any]]]:
    """Each prompt twice (odd ones streamed), shuffled, dealt round-robin to the processes."""
    asks = [[p, p % 2 == 1] for p in range(prompts) for _ in range(2)]
    random.Random(seed).shuffle(asks)
    return [asks[i::processes] for i in range(processes)]


def _coalescing(
    sim: SimProcess, redis_url: str, args: argparse.Namespace, coalesce: bool, tag: str
) -> dict[str, Any]:
    control = httpx.Client(base_url=sim.root)
    control.post("/_bench/settings", json={"latency": args.latency})
    control.post("/_bench/reset")
    start_at = time.time() + 5.0
    shares = _deal(args.processes, args.prompts, args.seed)
    workers = [
        _spawn(
            "coalesce",
            {
                "redis": redis_url,
                "base_url": f"{sim.root}/openai/v1",
                "coalesce": coalesce,
                "asks": share,
                "start_at": start_at,
                "tag": tag,
            },
        )
        for share in shares
    ]
    results = _collect(workers)
    stats = control.get("/_bench/stats").json()
    latencies = sorted(x for r in results for x in r["latencies"])
    upstream = stats["requests"]
    return {
        "coalesce": coalesce,
        "asks": sum(r["calls"] for r in results),
        "hits": sum(r["hits"] for r in results),
        "upstream_calls": upstream,
        "paid_twice": upstream - args.prompts,
        "latency_p50_s": statistics.median(latencies),
        "latency_p95_s": latencies[int(0.95 * (len(latencies) - 1))],
    }


_TRANSIENT = 0.5
"""Seconds after Redis goes away, or comes back, counted as their own phase."""


def _outage_run(sim: SimProcess, server: RedisProcess, args: argparse.Namespace) -> dict[str, Any]:
    control = httpx.Client(base_url=sim.root)
    control.post("/_bench/settings", json={"latency": 0.2})
    control.post("/_bench/reset")
    start_at = time.time() + 5.0
    job = {
        "redis": server.url,
        "base_url": f"{sim.root}/openai/v1",
        "rpm": args.rpm,
        "concurrency": args.concurrency,
        "retry_interval": 0.5,
        "start_at": start_at,
        "until": start_at + args.seconds,
    }
    workers = [_spawn("outage", job) for _ in range(args.processes)]
    phases: list[dict[str, Any]] = []
    arrivals: list[float] = []

    def phase(name: str, until: float) -> None:
        time.sleep(max(0.0, until - time.time()))
        stats = control.get("/_bench/stats").json()
        control.post("/_bench/reset")
        arrivals.extend(stats["arrivals"])
        phases.append(
            {"phase": name, "received": stats["requests"], "max_in_flight": stats["max_in_flight"]}
        )

    phase("Redis up", start_at + args.kill_at)
    server.stop()
    phase("Redis gone, first 0.5 s", start_at + args.kill_at + _TRANSIENT)
    phase("Redis gone", start_at + args.restart_at)
    server.start()
    phase("Redis back (empty), first 0.5 s", start_at + args.restart_at + _TRANSIENT)
    results = _collect(workers)
    phase("Redis back", time.time())
    control.post("/_bench/settings", json={"latency": 0.0})
    arrivals.sort()
    span = arrivals[-1] - arrivals[0]
    allowed = args.rpm + args.rpm / 60 * span
    return {
        "label": args.label,
        "processes": args.processes,
        "tasks_per_process": _TASKS,
        "rpm": args.rpm,
        "max_concurrency": args.concurrency,
        "seconds": args.seconds,
        "kill_at": args.kill_at,
        "restart_at": args.restart_at,
        "phases": phases,
        "received": len(arrivals),
        "span_seconds": span,
        "allowed": allowed,
        "received_over_allowed": len(arrivals) / allowed,
        "max_in_flight": max(p["max_in_flight"] for p in phases),
        "workers": results,
    }


def _outage_main(args: argparse.Namespace) -> int:
    with RedisProcess() as server, SimProcess() as sim:
        before = os.getloadavg()
        result = _outage_run(sim, server, args)
        result["load_average"] = [before, os.getloadavg()]
    result["when"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    path = RESULTS.parent / f"fleet-outage-{args.label}.json"
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(
        f"outage ({args.label}): {args.processes} processes x {_TASKS} tasks, {args.rpm:g} rpm, "
        f"{args.concurrency} slots; Redis stopped at {args.kill_at:g} s, back at "
        f"{args.restart_at:g} s of {args.seconds:g} s"
    )
    for p in result["phases"]:
        print(f"  {p['phase']:34} received {p['received']:4}, most in flight {p['max_in_flight']}")
    print(
        f"  received {result['received']} of {result['allowed']:.1f} allowed over "
        f"{result['span_seconds']:.1f} s ({result['received_over_allowed']:.3f})"
    )
    print(f"results: {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the scenarios (or, with a worker kind as first argument, one worker)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("coalesce", "outage"):
        _run_worker(argv[0], json.loads(argv[1]))
        return 0
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fleet")
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=160)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument("--outage", action="store_true", help="run the outage scenario")
    parser.add_argument("--rpm", type=float, default=300.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--kill-at", type=float, default=6.0)
    parser.add_argument("--restart-at", type=float, default=12.0)
    parser.add_argument("--label", default="this-build")
    args = parser.parse_args(argv)
    if args.outage:
        return _outage_main(args)
    runs: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    with RedisProcess() as server, SimProcess() as sim:
        before = os.getloadavg()
        for rep in range(args.reps):
            for mode in ("off", "on"):
                tag = f"{mode}-{rep}-{time.time_ns()}"
                runs[mode].append(_coalescing(sim, server.url, args, mode == "on", tag))
        after = os.getloadavg()
    result = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpus": os.cpu_count(),
        "load_average_before": before,
        "load_average_after": after,
        "coalescing": {
            "processes": args.processes,
            "prompts": args.prompts,
            "asks_per_prompt": 2,
            "tasks_per_process": _TASKS,
            "latency_s": args.latency,
            "runs": runs,
        },
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(
        f"coalescing: {args.processes} processes x {args.prompts} prompts asked twice "
        f"({_TASKS} tasks each, {args.latency:g} s upstream latency)"
    )
    for mode, label in (("off", "coalesce=False"), ("on", "coalescing (default)")):
        for run in runs[mode]:
            print(
                f"  {label:22} upstream {run['upstream_calls']:4} "
                f"(paid twice {run['paid_twice']:3}), hits {run['hits']:3} of {run['asks']}, "
                f"latency p50 {run['latency_p50_s']:.3f} s p95 {run['latency_p95_s']:.3f} s"
            )
    print(f"results: {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
