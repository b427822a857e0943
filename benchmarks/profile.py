"""Where one call of a long conversation spends its CPU: a profile of the conversation case.

``python -m benchmarks.profile`` starts the simulator (``benchmarks/simproc.py``) and, for
each client, a fresh process that builds the conversation-size scenario's conversation
(``--messages`` OpenAI Chat dicts and 30 tools, :func:`benchmarks.workload.conversation`),
makes two warm-up calls, then ``--calls`` measured calls replacing the last prompt each time
(so a cache misses): first unprofiled, for the CPU per call (``time.process_time``, every
thread) and the collector's share of it (``gc.callbacks``: collections, full ones apart, and
their time); then the same number under ``cProfile`` with the main thread's CPU clock as its
timer, so waiting for the simulator does not count. It prints, per client, the CPU per
call, the collector's part, and the functions with the most CPU of their own (per call,
profiler overhead included, so read them as shares), grouped by package and one by one.
``--json PATH`` writes everything. The summary of a run before and after the remembered
conversions is in ``benchmarks/README.md`` (Profile of a 3,000-message call).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import pstats
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["main"]

_DEFAULT_CLIENTS = ("raw-httpx", "polythink-default", "polythink-full-aiohttp")


def _where(filename: str) -> str:
    """The package a profiled function belongs to (``polythink``, ``httpx`` …, ``builtins``
    for C functions, ``stdlib`` for the standard library)."""
    if filename == "~":
        return "builtins"
    if "/polythink/" in filename:
        return "polythink"
    if "site-packages/" in filename:
        return filename.split("site-packages/", 1)[1].split("/", 1)[0]
    return "stdlib"


def _label(filename: str, line: int, name: str) -> str:
    if filename == "~":
        return name
    short = filename.split("site-packages/", 1)[-1].split("/src/", 1)[-1]
    if "/lib/python3" in short:
        short = "stdlib/" + short.rsplit("/", 1)[-1]
    return f"{short}:{line}({name})"


async def _measure(job: dict[str, Any]) -> dict[str, Any]:
    from benchmarks.clients import make_adapter
    from benchmarks.workload import OPENAI_CHAT, conversation, prompt, tools, workload

    adapter = make_adapter(job["client"], job["root"], workload(*OPENAI_CHAT, stream=False))
    await adapter.open()
    spec = tools()
    messages = conversation(job["messages"], 1)
    calls = job["calls"]
    counter = iter(range(10, 10**9))

    async def call() -> None:
        messages[-1] = {"role": "user", "content": prompt(next(counter))}
        await adapter.converse(messages, spec)

    collected = {"collections": 0, "full": 0, "seconds": 0.0, "full_seconds": 0.0}
    started = [0.0]

    def watch(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
            return
        spent = time.perf_counter() - started[0]
        collected["collections"] += 1
        collected["seconds"] += spent
        if info["generation"] == 2:
            collected["full"] += 1
            collected["full_seconds"] += spent

    try:
        for _ in range(2):
            await call()
        gc.collect()
        gc.callbacks.append(watch)
        cpu = time.process_time()
        for _ in range(calls):
            await call()
        cpu = (time.process_time() - cpu) / calls
        gc.callbacks.remove(watch)
        profiler = cProfile.Profile(time.thread_time_ns, 1e-9)
        profiler.enable()
        for _ in range(calls):
            await call()
        profiler.disable()
    finally:
        await adapter.close()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    packages: dict[str, float] = {}
    functions = []
    for (filename, line, name), (_, count, own, total, _) in stats.items():
        where = _where(filename)
        packages[where] = packages.get(where, 0.0) + own
        functions.append(
            {
                "function": _label(filename, line, name),
                "package": where,
                "own": own / calls,
                "total": total / calls,
                "calls": count / calls,
            }
        )
    functions.sort(key=lambda f: -f["own"])
    return {
        "client": job["client"],
        "messages": job["messages"],
        "calls": calls,
        "cpu_per_call": cpu,
        "gc": {k: v / calls if "seconds" in k else v for k, v in collected.items()},
        "profiled_per_call": sum(packages.values()) / calls,
        "packages": {k: v / calls for k, v in sorted(packages.items(), key=lambda i: -i[1])},
        "functions": functions[:40],
        "tracked_objects": len(gc.get_objects()),
    }


def _worker() -> None:
    job = json.loads(sys.stdin.read())
    print(json.dumps(asyncio.run(_measure(job))))


def _summary(result: dict[str, Any], top: int) -> str:
    gc_part = result["gc"]
    lines = [
        f"{result['client']}, {result['messages']} messages: "
        f"{result['cpu_per_call'] * 1e6:,.0f} us CPU per call; collector "
        f"{gc_part['seconds'] * 1e6:,.0f} us per call ({gc_part['collections']} collections, "
        f"{gc_part['full']} full: {gc_part['full_seconds'] * 1e6:,.0f} us per call); "
        f"{result['tracked_objects']:,} objects tracked after",
        "  profiled CPU per call by package (us): "
        + ", ".join(f"{k} {v * 1e6:,.0f}" for k, v in list(result["packages"].items())[:6]),
    ]
    for f in result["functions"][:top]:
        lines.append(f"  {f['own'] * 1e6:9,.0f} us own  {f['calls']:8,.0f} calls  {f['function']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Profile each client's call in a fresh process; print the summaries."""
    from benchmarks.simproc import SimProcess

    parser = argparse.ArgumentParser(prog="python -m benchmarks.profile")
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--calls", type=int, default=15)
    parser.add_argument("--clients", default=",".join(_DEFAULT_CLIENTS))
    parser.add_argument("--top", type=int, default=12, help="functions listed per client")
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args(argv)
    results = []
    with SimProcess() as sim:
        for client in args.clients.split(","):
            job = {
                "client": client.strip(),
                "root": sim.root,
                "messages": args.messages,
                "calls": args.calls,
            }
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.profile", "--worker"],
                input=json.dumps(job),
                capture_output=True,
                text=True,
                cwd=Path(__file__).resolve().parent.parent,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                check=False,
            )
            if done.returncode != 0:
                print(f"{client}: failed: {done.stderr.strip().splitlines()[-1:]}")
                continue
            result = json.loads(done.stdout.strip().splitlines()[-1])
            results.append(result)
            print(_summary(result, args.top), flush=True)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        _worker()
    else:
        raise SystemExit(main())
