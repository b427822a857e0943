"""Worker processes sharing a cache on Redis: what they pay for repeated calls.

Run ``python -m benchmarks.coalescing`` (needs ``redis-server`` on the PATH and the ``redis``
extra). It starts a redis-server on a free port and the simulator in its own process
(``benchmarks/simproc.py``), then:

**Coalescing** (``--processes`` × ``--prompts``): every prompt is asked twice, half of them
as streams; the 2 × prompts asks are shuffled (fixed seed) and dealt round-robin to the
processes, which run them with 8 tasks each against a simulator answering after
``--latency`` seconds, all sharing ``Client(cache=RedisCache(url, …))``. Measured at the
simulator: the upstream calls, against the prompts (each needs one). Run twice in one run,
alternating: with the cache's cross-process coalescing off (``coalesce=False``: every
process that misses calls) and on (the default).

Results go to ``benchmarks/results/coalescing.json`` and a table on stdout.
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

RESULTS = Path(__file__).resolve().parent / "results" / "coalescing.json"
_TASKS = 8
_ROOT = Path(__file__).resolve().parent.parent


# --- worker side ------------------------------------------------------------------------


async def _coalesce(job: dict[str, Any]) -> dict[str, Any]:
    from contextlib import aclosing

    import anyio

    from polythink import Client, Source
    from polythink.backends.redis import RedisCache

    source = Source("openai", "gpt-5.5", api_key="sk-bench-coalescing", base_url=job["base_url"])
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


def _run_worker(kind: str, job: dict[str, Any]) -> None:
    import anyio

    result = anyio.run(_coalesce, job)
    sys.stdout.write(json.dumps(result) + "\n")


def _spawn(kind: str, job: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "benchmarks.coalescing", kind, json.dumps(job)],
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


def main(argv: list[str] | None = None) -> int:
    """Run the scenarios (or, with a worker kind as first argument, one worker)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "coalesce":
        _run_worker(argv[0], json.loads(argv[1]))
        return 0
    parser = argparse.ArgumentParser(prog="python -m benchmarks.coalescing")
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=160)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--seed", type=int, default=23)
    args = parser.parse_args(argv)
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
