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

``--outage`` runs a third scenario alone. **Outage**: the ``--workers`` processes (8 tasks
each) share one source limited to ``--rpm`` and ``--concurrency`` through Redis for
``--seconds``, calling as fast as the limits let them (a refused call waits out its
``retry_after``, 0.5 s at most, and goes on) against a simulator answering after 0.2 s. The
redis-server is stopped ``--kill-at`` seconds in and started again, empty, at
``--restart-at``. Measured at the simulator, per phase (Redis up, the first 0.5 s without it,
without it, the first 0.5 s with it again, with it): the calls received and the most in
flight at once; over the run, the calls received against what the limit allows (the
bucket's minute at the first call plus its refill until the last). ``--label`` names the
build measured (run it with another build's ``src`` first on ``PYTHONPATH`` for a
before/after); results go to ``benchmarks/results/shared-limits-outage-<label>.json``.

``--unreached`` runs a fourth alone. **Redis never there**: the ``--workers`` processes (8
tasks each) share one source limited to ``--rpm`` (default 60) and ``--concurrency`` for
``--seconds`` (default 5), calling as in the outage scenario, three times: with Redis up,
with nothing listening at its address, and the same with ``?workers=N`` in the URL (N the
number of processes). Measured at the simulator: the calls received against what the limit
allows (the bucket's minute plus its refill over the run) and the most in flight. Then the
same three with one daily spend budget and no rate limit instead (``_BUDGET``: 4 tasks per
process calling for 8 s against a simulator answering in 0.05 s, a refused call trying again
0.1 s later): what each process spent.
Results go to ``benchmarks/results/shared-limits-unreached.json``.
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
_OUTAGE_LATENCY = 0.2


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

    from polythink import Budget, BudgetExceededError, Client, Source
    from polythink.errors import PolythinkError, RateLimitedError

    source = Source(
        "openai",
        "gpt-5.5",
        api_key="sk-bench-shared",
        base_url=job["base_url"],
        rpm=job["rpm"],
        max_concurrency=job["concurrency"],
    )
    limits: Any = job["redis"]
    if job.get("outage"):
        from polythink.backends.redis import RedisLimitStore

        # A loaded machine may starve a worker past the default 0.5 s socket timeout, which
        # would look like an outage to that worker alone; this scenario times a real one.
        limits = RedisLimitStore(limits, retry_interval=0.5, socket_timeout=2.0)
    budgets = [Budget(job["budget"], "day", name="bench")] if job.get("budget") else []
    sent = refused = timed_out = 0
    spent = 0.0
    unaffordable: dict[str, int] = {}
    async with Client([source], limits=limits, budgets=budgets) as client:
        await anyio.sleep(max(0.0, job["start_at"] - time.time()))

        async def task(i: int) -> None:
            nonlocal sent, refused, timed_out, spent
            n = 0
            while (left := job["until"] - time.time()) > 0:
                n += 1
                prompt = [{"role": "user", "content": f"call {os.getpid()}-{i}-{n}"}]
                try:
                    answer = await client.complete(
                        prompt,
                        timeout=left,
                        reasoning_effort=job.get("effort"),
                        max_tokens=job.get("max_tokens"),
                    )
                except BudgetExceededError as exc:
                    # Refused unsent; a budget shared on Redis may allow it again later.
                    kind = exc.error_type or ""
                    unaffordable[kind] = unaffordable.get(kind, 0) + 1
                    await anyio.sleep(min(0.1, left))
                    continue
                except RateLimitedError as exc:
                    refused += 1
                    if not job.get("outage"):
                        return
                    # Through an outage the load goes on: wait out the refusal (0.5 s at most).
                    await anyio.sleep(min(exc.retry_after or 0.5, 0.5, left))
                    continue
                except PolythinkError:
                    # Admitted near the end, it ran out of its deadline in flight.
                    timed_out += 1
                    return
                sent += 1
                spent += answer.cost.total if answer.cost is not None else 0.0

        async with anyio.create_task_group() as tg:
            for i in range(job.get("tasks", _TASKS)):
                tg.start_soon(task, i)
    return {
        "sent": sent,
        "refused": refused,
        "timed_out": timed_out,
        "spent_usd": spent,
        "budget_refusals": unaffordable,
    }


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


def _ready(sim: SimProcess, latency: float) -> tuple[httpx.Client, float]:
    """Set the simulator's latency, forget its statistics; return its control client and
    the epoch second the workers start at (5 s from now: their imports take a while)."""
    control = httpx.Client(base_url=sim.root)
    control.post("/_bench/settings", json={"latency": latency})
    control.post("/_bench/reset")
    return control, time.time() + 5.0


def _adherence(sim: SimProcess, url: str, args: argparse.Namespace) -> dict[str, Any]:
    control, start_at = _ready(sim, _LATENCY)
    job = {
        "redis": url,
        "base_url": f"{sim.root}/openai/v1",
        "rpm": args.rpm,
        "concurrency": args.concurrency,
        "start_at": start_at,
        "until": start_at + args.seconds,
    }
    workers = _loads([_spawn_load(job) for _ in range(args.workers)])
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


def _spawn_load(job: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "benchmarks.shared_limits", "load", json.dumps(job)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )


def _loads(procs: list[subprocess.Popen[str]]) -> list[dict[str, Any]]:
    workers = []
    for process in procs:
        out, err = process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"load worker failed: {err[-2000:]}")
        workers.append(json.loads(out.splitlines()[-1]))
    return workers


_TRANSIENT = 0.5
"""Seconds after Redis goes away, or comes back, counted as their own phase."""


def _outage(sim: SimProcess, server: RedisProcess, args: argparse.Namespace) -> dict[str, Any]:
    control, start_at = _ready(sim, _OUTAGE_LATENCY)
    job = {
        "redis": server.url,
        "outage": True,
        "base_url": f"{sim.root}/openai/v1",
        "rpm": args.rpm,
        "concurrency": args.concurrency,
        "start_at": start_at,
        "until": start_at + args.seconds,
    }
    procs = [_spawn_load(job) for _ in range(args.workers)]
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
    workers = _loads(procs)
    phase("Redis back", time.time())
    control.post("/_bench/settings", json={"latency": 0.0})
    arrivals.sort()
    span = arrivals[-1] - arrivals[0]
    allowed = args.rpm + args.rpm / 60 * span
    return {
        "label": args.label,
        "workers": args.workers,
        "tasks_per_worker": _TASKS,
        "latency_s": _OUTAGE_LATENCY,
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
        "per_worker": workers,
    }


_BUDGET = {"budget": 0.60, "effort": "low", "max_tokens": 400, "tasks": 4}
"""The budget runs of ``--unreached``: $0.60 a day, gpt-5.5 at ``low`` with ``max_tokens``
400 (a worst case of $0.012), 4 tasks per process, no rate limit or concurrency cap, against
a simulator answering in 0.05 s."""
_BUDGET_SECONDS = 8.0
_BUDGET_LATENCY = 0.05


def _unreached(sim: SimProcess, args: argparse.Namespace) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {"limits": [], "budget": []}
    with RedisProcess() as up:
        absent = RedisProcess()  # a free port of its own, where nothing is started
        urls = (
            ("Redis up", up.url),
            ("Redis never there", absent.url),
            (f"Redis never there, ?workers={args.workers}", f"{absent.url}?workers={args.workers}"),
        )
        for kind in ("limits", "budget"):
            limits = kind == "limits"
            seconds = args.seconds if limits else _BUDGET_SECONDS
            for name, url in urls:
                control, start_at = _ready(sim, _OUTAGE_LATENCY if limits else _BUDGET_LATENCY)
                job: dict[str, Any] = {
                    "redis": url,
                    "outage": True,
                    "base_url": f"{sim.root}/openai/v1",
                    "rpm": args.rpm if limits else None,
                    "concurrency": args.concurrency if limits else None,
                    "start_at": start_at,
                    "until": start_at + seconds,
                }
                if kind == "budget":
                    job.update(_BUDGET)
                workers = _loads([_spawn_load(job) for _ in range(args.workers)])
                stats = control.get("/_bench/stats").json()
                run = {
                    "run": name,
                    "seconds": seconds,
                    "received": stats["requests"],
                    "max_in_flight": stats["max_in_flight"],
                }
                if limits:
                    run["allowed"] = args.rpm + args.rpm / 60 * seconds
                else:
                    run["spent_usd"] = [w["spent_usd"] for w in workers]
                    run["budget_refusals"] = [w["budget_refusals"] for w in workers]
                runs[kind].append(run)
    return {
        "workers": args.workers,
        "tasks_per_worker": _TASKS,
        "latency_s": _OUTAGE_LATENCY,
        "rpm": args.rpm,
        "max_concurrency": args.concurrency,
        "budget": _BUDGET,
        **runs,
    }


def _unreached_main(args: argparse.Namespace) -> int:
    with SimProcess() as sim:
        before = os.getloadavg()
        result = _unreached(sim, args)
        result["load_average"] = [before, os.getloadavg()]
    result["when"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    path = RESULTS.parent / "shared-limits-unreached.json"
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(
        f"Redis never there: {args.workers} workers x {_TASKS} tasks, {args.rpm:g} rpm, "
        f"{args.concurrency} in flight, {args.seconds:g} s"
    )
    for run in result["limits"]:
        print(
            f"  {run['run']:34} received {run['received']:4} of {run['allowed']:g} allowed, "
            f"most in flight {run['max_in_flight']}"
        )
    budget = result["budget"]
    print(
        f"budget ${_BUDGET['budget']:g} a day, {args.workers} workers x {_BUDGET['tasks']} tasks, "
        f"gpt-5.5 at {_BUDGET['effort']}, max_tokens {_BUDGET['max_tokens']}, "
        f"{_BUDGET_SECONDS:g} s"
    )
    for run in budget:
        each = ", ".join(f"{usd:.3f}" for usd in run["spent_usd"])
        print(f"  {run['run']:34} spent ${sum(run['spent_usd']):.3f} (${each})")
    print(f"results: {path}")
    return 0


def _outage_main(args: argparse.Namespace) -> int:
    with RedisProcess() as server, SimProcess() as sim:
        before = os.getloadavg()
        result = _outage(sim, server, args)
        result["load_average"] = [before, os.getloadavg()]
    result["when"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    path = RESULTS.parent / f"shared-limits-outage-{args.label}.json"
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(
        f"outage ({args.label}): {args.workers} workers x {_TASKS} tasks, {args.rpm:g} rpm, "
        f"{args.concurrency} in flight; Redis stopped at {args.kill_at:g} s, back (empty) at "
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
    parser.add_argument("--seconds", type=float, default=None, help="20 (--unreached: 5)")
    parser.add_argument(
        "--rpm", type=float, default=None, help="600 (--outage: 300, --unreached: 60)"
    )
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument(
        "--outage",
        action="store_true",
        help="run the outage scenario only",
    )
    parser.add_argument(
        "--unreached",
        action="store_true",
        help="run the scenario of a Redis never there only",
    )
    parser.add_argument("--kill-at", type=float, default=6.0)
    parser.add_argument("--restart-at", type=float, default=12.0)
    parser.add_argument("--label", default="this-build")
    args = parser.parse_args(argv)
    if args.rpm is None:
        args.rpm = 300.0 if args.outage else 60.0 if args.unreached else 600.0
    if args.seconds is None:
        args.seconds = 5.0 if args.unreached else 20.0
    if args.outage:
        return _outage_main(args)
    if args.unreached:
        return _unreached_main(args)
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
