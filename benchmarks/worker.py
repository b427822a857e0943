"""One measurement in its own process: ``python -m benchmarks.worker`` with a JSON job on stdin.

The job names a client, a :class:`~benchmarks.workload.Workload`, the simulator's root URL, a
measurement kind and its parameters. The worker writes JSON lines to stdout:
``{"progress": done, "total": n}`` now and then, and one last line, ``{"result": {...}}``,
``{"skipped": reason}`` or ``{"error": message}``.

Units in results: seconds for latencies and CPU (``process_time``, every thread of the
process), KiB for RSS (``ru_maxrss``). Kinds:

- ``load``: ``n`` calls at each concurrency in ``concurrency`` (after a warm-up of
  ``warmup`` calls at that concurrency): CPU per request, requests per second, p50 and p99
  latency, errors; then the process's peak RSS.
- ``stream``: ``n`` streamed calls at ``concurrency``: CPU per delta, time to first delta
  (p50, p99), deltas per stream.
- ``memory``: a warm-up stream, then one stream of ``words`` answer words: peak RSS growth.
- ``cache``: ``n`` loopback round trips with raw httpx, then ``n`` cache hits through the
  client: latency of each (p50, mean).
- ``faults``: ``n`` calls without faults, then ``n`` with the simulator's fault mix: success
  rate, latency, calls the simulator received per logical call.
- ``conversation``: for each size in ``sizes`` (messages, ascending), ``warmup`` calls then
  the size's count in ``calls``, one at a time, of a conversation of that size with
  ``TOOLS`` tools (:func:`~benchmarks.workload.conversation`; only the last prompt changes):
  CPU per call, p50 latency, request body bytes, and the process's peak RSS so far. Then an
  agent loop: from a conversation of ``agent_start`` messages, ``turns`` calls, each
  appending the answer and a new user message to the conversation as the client's users
  keep it: CPU of every turn.
- ``ratelimit``: from ``callers`` concurrent callers through a client limited to ``rpm`` and
  ``max_concurrency``, first ``rpm`` calls (the bucket's one-minute burst), then at least
  ``steady`` more: the pace of the second half of those at the simulator (requests per
  minute) and the simulator's most calls in flight.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import json
import os
import resource
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from benchmarks.clients import API_KEY, Adapter, Missing, make_adapter
from benchmarks.workload import Workload, conversation, prompt, tools

__all__ = ["main", "percentile"]


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by nearest rank; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def _emit(payload: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(payload) + "\n")
    sys.stdout.flush()


def _max_rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class _Progress:
    """Report progress about 20 times per phase (so reporting costs next to nothing)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.step = max(1, total // 20)

    def tick(self) -> None:
        self.done += 1
        if self.done % self.step == 0 or self.done == self.total:
            _emit({"progress": self.done, "total": self.total})


def _settled() -> None:
    """Start a measured phase from a full collection, for every client alike: the garbage
    of setting up and warming up (a conversation built, connections opened, first calls
    converted) is not charged to the calls measured next; every collection those calls
    cause is."""
    gc.collect()


async def _lanes(
    call: Callable[[int], Awaitable[Any]],
    start: int,
    n: int,
    concurrency: int,
    progress: _Progress | None,
) -> tuple[list[float], int, float, float]:
    """Run calls ``start … start+n-1`` on ``concurrency`` lanes.

    Returns (latencies of successful calls, errors, wall seconds, CPU seconds).
    """
    indices = iter(range(start, start + n))
    latencies: list[float] = []
    errors = 0

    async def lane() -> None:
        nonlocal errors
        for i in indices:
            began = time.perf_counter()
            try:
                await call(i)
            except Exception:
                errors += 1
            else:
                latencies.append(time.perf_counter() - began)
            if progress is not None:
                progress.tick()

    cpu = time.process_time()
    wall = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(concurrency)))
    return latencies, errors, time.perf_counter() - wall, time.process_time() - cpu


async def _load(adapter: Adapter, params: dict[str, Any]) -> dict[str, Any]:
    n = int(params["n"])
    levels = [int(c) for c in params["concurrency"]]
    progress = _Progress(n * len(levels))
    expected = params.get("expected_text")
    checked = await adapter.complete(0)
    if expected is not None and checked != expected:
        raise RuntimeError(f"{adapter.name} parsed {checked!r}, expected {expected!r}")
    out: dict[str, Any] = {}
    offset = 1
    for level in levels:
        warmup = max(level, int(params.get("warmup", 0)))
        await _lanes(adapter.complete, offset, warmup, level, None)
        offset += warmup
        _settled()
        latencies, errors, wall, cpu = await _lanes(adapter.complete, offset, n, level, progress)
        offset += n
        out[str(level)] = {
            "n": n,
            "errors": errors,
            "cpu_per_request": cpu / n,
            "rps": n / wall,
            "p50": percentile(latencies, 50),
            "p99": percentile(latencies, 99),
            "mean": statistics.fmean(latencies) if latencies else 0.0,
        }
    out["peak_rss_kib"] = _max_rss_kib()
    return out


async def _stream(adapter: Adapter, params: dict[str, Any]) -> dict[str, Any]:
    n = int(params["n"])
    level = int(params["concurrency"])
    per_stream = int(params["deltas_per_stream"])
    progress = _Progress(n)
    firsts: list[float] = []
    deltas: list[int] = []

    async def one(i: int) -> None:
        began = time.perf_counter()

        def first() -> None:
            firsts.append(time.perf_counter() - began)

        deltas.append(await adapter.stream(i, first))

    await _lanes(one, 1, max(level, int(params.get("warmup", 0))), level, None)
    firsts.clear()
    deltas.clear()
    _settled()
    latencies, errors, _wall, cpu = await _lanes(one, 10_000, n, level, progress)
    total = sum(deltas)
    return {
        "n": n,
        "errors": errors,
        "deltas_per_stream": total / len(deltas) if deltas else 0.0,
        "complete_streams": sum(1 for d in deltas if d == per_stream),
        "cpu_per_delta": cpu / total if total else 0.0,
        "cpu_per_stream": cpu / n,
        "ttft_p50": percentile(firsts, 50),
        "ttft_p99": percentile(firsts, 99),
        "stream_p50": percentile(latencies, 50),
        "peak_rss_kib": _max_rss_kib(),
    }


async def _memory(adapter: Adapter, params: dict[str, Any], control: _Control) -> dict[str, Any]:
    await adapter.stream(1, lambda: None)
    await control.post("settings", {"answer_words": int(params["words"])})
    before = _max_rss_kib()
    cpu = time.process_time()
    seen = await adapter.stream(2, lambda: None)
    return {
        "deltas": seen,
        "rss_before_kib": before,
        "rss_growth_kib": _max_rss_kib() - before,
        "cpu_per_delta": (time.process_time() - cpu) / seen if seen else 0.0,
    }


async def _cache(adapter: Adapter, params: dict[str, Any], root: str) -> dict[str, Any]:
    n = int(params["n"])
    progress = _Progress(2 * n)
    work = adapter.work
    url = f"{root}/{work.provider}/v1/chat/completions"
    headers = {"content-type": "application/json", "authorization": f"Bearer {API_KEY}"}
    body = json.dumps(work.body_for(1)).encode()
    round_trips: list[float] = []
    async with httpx.AsyncClient() as raw:
        for _ in range(max(10, n // 10)):
            (await raw.post(url, content=body, headers=headers)).raise_for_status()
        for _ in range(n):
            began = time.perf_counter()
            response = await raw.post(url, content=body, headers=headers)
            json.loads(response.content)
            round_trips.append(time.perf_counter() - began)
            progress.tick()
    client = getattr(adapter, "client", None)
    if client is None:
        raise Missing(f"{adapter.name} has no response cache")
    messages = [{"role": "user", "content": "cached prompt"}]
    await client.complete(messages)
    hits: list[float] = []
    served = 0
    for _ in range(n):
        began = time.perf_counter()
        response = await client.complete(messages)
        hits.append(time.perf_counter() - began)
        served += bool(response.cache_hit)
        progress.tick()
    if served == 0:
        raise Missing(
            "no call was served from the cache: this build's Client accepts cache= "
            "but has no cache layer"
        )
    return {
        "n": n,
        "hits_served": served,
        "round_trip_p50": percentile(round_trips, 50),
        "round_trip_mean": statistics.fmean(round_trips),
        "hit_p50": percentile(hits, 50),
        "hit_mean": statistics.fmean(hits),
    }


async def _faults(adapter: Adapter, params: dict[str, Any], control: _Control) -> dict[str, Any]:
    n = int(params["n"])
    level = int(params["concurrency"])
    progress = _Progress(2 * n)
    await _lanes(adapter.complete, 1, level, level, None)
    await control.post("reset", {})
    clean, clean_errors, _, _ = await _lanes(adapter.complete, 100, n, level, progress)
    clean_upstream = (await control.stats())["requests"]
    await control.post("faults", {"rate": params["rate"], "mix": params["mix"], "seed": 7})
    await control.post("reset", {})
    try:
        faulty, _errors, _, _ = await _lanes(adapter.complete, 100 + n, n, level, progress)
        stats = await control.stats()
    finally:
        await control.post("faults", {"rate": 0})
    return {
        "n": n,
        "success_rate": len(faulty) / n,
        "clean_success_rate": len(clean) / n,
        "clean_errors": clean_errors,
        "mean": statistics.fmean(faulty) if faulty else 0.0,
        "clean_mean": statistics.fmean(clean) if clean else 0.0,
        "p99": percentile(faulty, 99),
        "upstream_per_call": stats["requests"] / n,
        "clean_upstream_per_call": clean_upstream / n,
        "faults_injected": stats["faults_injected"],
    }


async def _ratelimit(adapter: Adapter, params: dict[str, Any], control: _Control) -> dict[str, Any]:
    rpm = float(params["rpm"])
    callers = int(params["callers"])
    burst = int(rpm)
    await control.post("reset", {})
    began = time.perf_counter()
    _, burst_errors, _, _ = await _lanes(adapter.complete, 1, burst, callers, None)
    refilled = rpm / 60.0 * (time.perf_counter() - began)
    burst_stats = await control.stats()
    # What refilled during the burst goes out at once; three times that many calls leave a
    # second half paced by the limit alone.
    steady = max(int(params["steady"]), round(3 * refilled))
    await control.post("reset", {})
    _, errors, wall, _ = await _lanes(
        adapter.complete, 1 + burst, steady, callers, _Progress(steady)
    )
    stats = await control.stats()
    tail = sorted(stats["arrivals"])[-(steady // 2) :]
    pace = 60.0 * (len(tail) - 1) / (tail[-1] - tail[0]) if tail[-1] > tail[0] else 0.0
    return {
        "n": burst + steady,
        "burst": burst,
        "steady": steady,
        "errors": burst_errors + errors,
        "upstream": burst_stats["requests"] + stats["requests"],
        "rpm_configured": params["rpm"],
        "rpm_steady": pace,
        "rpm_steady_phase": 60.0 * stats["requests"] / wall,
        "max_concurrency": params["max_concurrency"],
        "max_in_flight": max(burst_stats["max_in_flight"], stats["max_in_flight"]),
    }


async def _conversation(adapter: Adapter, params: dict[str, Any]) -> dict[str, Any]:
    sizes = [int(s) for s in params["sizes"]]
    calls = [int(n) for n in params["calls"]]
    warmup = int(params.get("warmup", 2))
    turns = int(params["turns"])
    spec = tools()
    progress = _Progress(sum(calls) + turns)
    out: dict[str, Any] = {}
    offset = 1
    for size, n in zip(sizes, calls, strict=True):
        messages = conversation(size, offset)
        body_bytes = len(json.dumps({**adapter.work.body, "messages": messages, "tools": spec}))
        latencies: list[float] = []
        cpu = 0.0
        for k in range(warmup + n):
            # Only the last prompt changes, so a response cache misses on every call.
            messages[-1] = {"role": "user", "content": prompt(offset + k)}
            if k == warmup:
                _settled()
            began_cpu = time.process_time()
            began = time.perf_counter()
            await adapter.converse(messages, spec)
            if k >= warmup:
                latencies.append(time.perf_counter() - began)
                cpu += time.process_time() - began_cpu
                progress.tick()
        offset += warmup + n
        out[str(size)] = {
            "n": n,
            "body_bytes": body_bytes,
            "cpu_per_call": cpu / n,
            "p50": percentile(latencies, 50),
            "peak_rss_kib": _max_rss_kib(),
        }
    kept = adapter.keep(conversation(int(params["agent_start"]), offset))
    _settled()
    per_turn: list[float] = []
    for turn in range(turns):
        began_cpu = time.process_time()
        answer = await adapter.converse(kept, spec)
        kept.append(answer)
        kept.append(adapter.user_turn(prompt(offset + 1 + turn)))
        per_turn.append(time.process_time() - began_cpu)
        progress.tick()
    tenth = max(1, turns // 10)
    return {
        "sizes": out,
        "agent": {
            "start": int(params["agent_start"]),
            "turns": turns,
            "cpu_per_turn": per_turn,
            "first_tenth": statistics.fmean(per_turn[:tenth]),
            "last_tenth": statistics.fmean(per_turn[-tenth:]),
        },
        "peak_rss_kib": _max_rss_kib(),
    }


class _Control:
    """The simulator's ``/_bench/*`` control routes, over their own connection."""

    def __init__(self, root: str) -> None:
        self.http = httpx.AsyncClient(base_url=root, timeout=30.0)

    async def post(self, action: str, payload: dict[str, Any]) -> None:
        """POST a control action.

        Raises:
            Missing: the simulator lacks what the action needs (it answered 501).
            RuntimeError: any other refusal.
        """
        answer = await self.http.post(f"/_bench/{action}", content=json.dumps(payload))
        if answer.status_code == 501:
            raise Missing(answer.json()["error"])
        if answer.status_code != 200:
            raise RuntimeError(f"simulator control {action}: {answer.text[:200]}")

    async def stats(self) -> dict[str, Any]:
        body: dict[str, Any] = (await self.http.get("/_bench/stats")).json()
        return body


async def _run(job: dict[str, Any]) -> dict[str, Any]:
    work = Workload.from_json(job["workload"])
    params = job.get("params", {})
    kind = job["kind"]
    limits = None
    if kind == "ratelimit":
        if importlib.util.find_spec("polythink.middleware.ratelimit") is None:
            raise Missing("this build has no rate-limit layer (polythink.middleware.ratelimit)")
        limits = {"rpm": params["rpm"], "max_concurrency": params["max_concurrency"]}
    adapter = make_adapter(job["client"], job["root"], work, limits=limits)
    control = _Control(job["root"])
    for name, value in job.get("settings", {}).items():
        await control.post("settings", {name: value})
    await adapter.open()
    try:
        if kind == "load":
            result = await _load(adapter, params)
        elif kind == "stream":
            result = await _stream(adapter, params)
        elif kind == "memory":
            result = await _memory(adapter, params, control)
        elif kind == "cache":
            result = await _cache(adapter, params, job["root"])
        elif kind == "faults":
            result = await _faults(adapter, params, control)
        elif kind == "ratelimit":
            result = await _ratelimit(adapter, params, control)
        elif kind == "conversation":
            result = await _conversation(adapter, params)
        else:
            raise ValueError(f"unknown measurement kind {kind!r}")
    finally:
        await adapter.close()
        await control.http.aclose()
    if adapter.notes:
        result["notes"] = adapter.notes
    return result


def main() -> None:
    """Read one job from stdin, run it, write the result line."""
    job = json.loads(sys.stdin.read())
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        result = asyncio.run(_run(job))
    except Missing as exc:
        _emit({"skipped": str(exc)})
        return
    except Exception as exc:
        _emit({"error": f"{type(exc).__name__}: {exc}"})
        return
    _emit({"result": result})


if __name__ == "__main__":
    main()
