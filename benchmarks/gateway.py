"""``polythink serve`` beside LiteLLM's proxy: what each adds to a call over a direct one.

One run, one machine, one upstream: the provider simulator in its own process
(:mod:`benchmarks.simproc`, no latency, 12-word answers), called three ways with the same
OpenAI Chat Completions body (``gpt-5.5``, ``reasoning_effort: low``, a new prompt each call
so every cache misses): **direct** (the simulator itself), through **polythink serve** (one
worker) and through **LiteLLM's proxy** (one worker), each with every layer on:

- polythink serve: a tenant's key (SHA-256, compared in constant time), the tenant's rpm, tpm
  and concurrency limits, its spend budget (reserved and corrected on every call), the
  source's rpm and tpm limits, two retries, the reasoning layer, pricing, a disk cache that
  every call misses and writes, and the OpenTelemetry metrics served at ``/metrics``; limits
  in process (the Redis row below puts limits, budgets and cache on a local redis-server);
- LiteLLM's proxy: its master key, the deployment's rpm and tpm, two retries, its in-memory
  cache, and its Prometheus callback where the install has it. Its virtual keys and budgets
  need a Postgres database this machine does not run, so they are off.

For each target, concurrency (1 and 64) and mode (complete; streamed, timed to the first
content chunk), the harness sends warm-up calls, then the measured ones, in rounds that
alternate the targets so a change in the machine's load falls on each alike. It reports the
latency percentiles, what each gateway adds to the direct call's (p50 and p99), the gateway
process's CPU per call (user + system time of its process tree from ``/proc``, over the
measured calls), and requests per second per worker at saturation (c=64, complete: measured,
and the CPU-bound ceiling one core gives, 1 / CPU per call).

LiteLLM's proxy runs from ``benchmarks/.litellm-proxy`` (``benchmarks/litellm-proxy-venv.sh``
installs it; never committed); without it the LiteLLM rows are skipped with a note.

    python -m benchmarks.gateway [--quick] [--out benchmarks/results/gateway.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks.simproc import SimProcess

HERE = Path(__file__).resolve().parent
LITELLM = HERE / ".litellm-proxy" / "bin" / "litellm"
BENCH_KEY = "pt-bench-tenant-key-0123456789abcdef"
LITELLM_KEY = "sk-bench-master-0123456789"
TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def tree(pid: int) -> list[int]:
    """``pid`` and every descendant alive now."""
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        try:
            for task in Path(f"/proc/{current}/task").iterdir():
                pending += [int(c) for c in (task / "children").read_text().split()]
        except FileNotFoundError:
            continue
    return found


def tree_cpu(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and every descendant alive now."""
    total = 0.0
    for current in tree(pid):
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += (int(fields[11]) + int(fields[12])) / TICKS
    return total


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and its descendants."""
    total = 0
    for current in tree(pid):
        try:
            status = Path(f"/proc/{current}/status").read_text()
        except FileNotFoundError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) * 1024
    return total


@dataclass
class Target:
    """A server calls go to: its URL and headers, the model name it routes, its process."""

    name: str
    url: str
    headers: dict[str, str]
    model: str
    pid: int | None = None
    process: subprocess.Popen[bytes] | None = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


async def wait_ready(url: str, process: subprocess.Popen[bytes] | None, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                raise RuntimeError(f"{url}: the server exited with {process.returncode}")
            try:
                async with http.get(url, timeout=aiohttp.ClientTimeout(total=2)) as answer:
                    if answer.status < 500:
                        return
            except (aiohttp.ClientError, TimeoutError):
                pass
            await asyncio.sleep(0.2)
    raise RuntimeError(f"{url} not ready within {seconds:g} s")


def polythink_config(directory: Path, sim_root: str, port: int, *, redis: str | None) -> Path:
    shared = (
        f'limits = "{redis}"\ncache = "{redis}"\n'
        if redis
        else f'cache = "{directory / "cache"}"\n'
    )
    text = f"""{shared}
[[source]]
provider = "openai"
model = "gpt-5.5"
base_url = "{sim_root}/openai/v1"
api_key = "sk-bench-upstream-0123456789"
rpm = 100000000
tpm = 100000000000
max_concurrency = 100000
max_retries = 2

[[route]]
name = "bench"
sources = ["openai/gpt-5.5"]

[serve]
port = {port}
metrics = true
idle_timeout = 10

[[tenant]]
name = "bench"
key_env = "BENCH_GATEWAY_KEY"
rpm = 100000000
tpm = 100000000000
max_concurrency = 100000

[[tenant.budget]]
usd = 1000000.0
per = "day"
step_down_at = 0.99
"""
    path = directory / f"gateway-{port}.toml"
    path.write_text(text)
    return path


def start_polythink(
    directory: Path, sim_root: str, *, redis: str | None = None, workers: int = 1, name: str
) -> Target:
    port = free_port()
    config = polythink_config(directory, sim_root, port, redis=redis)
    env = {**os.environ, "BENCH_GATEWAY_KEY": BENCH_KEY, "PYTHONUNBUFFERED": "1"}
    command = [str(Path(sys.executable).parent / "polythink"), "serve", "--config", str(config)]
    if workers > 1:
        command += ["--workers", str(workers)]
    log = open(directory / f"{name}.log", "wb")  # noqa: SIM115 - the child's
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    target = Target(
        name,
        f"http://127.0.0.1:{port}/v1",
        {"authorization": f"Bearer {BENCH_KEY}"},
        "bench",
        process.pid,
        process,
    )
    asyncio.run(wait_ready(f"http://127.0.0.1:{port}/health", process, 120))
    return target


def start_litellm(directory: Path, sim_root: str) -> Target | None:
    if not LITELLM.exists():
        return None
    port = free_port()
    config = directory / "litellm.yaml"
    config.write_text(
        f"""model_list:
  - model_name: bench
    litellm_params:
      model: openai/gpt-5.5
      api_base: {sim_root}/openai/v1
      api_key: sk-bench-upstream-0123456789
      rpm: 100000000
      tpm: 100000000000
litellm_settings:
  num_retries: 2
  cache: true
  cache_params:
    type: local
  callbacks: ["prometheus"]
general_settings:
  master_key: {LITELLM_KEY}
"""
    )
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_LOG": "ERROR",
        "LITELLM_TELEMETRY": "False",
        "PYTHONUNBUFFERED": "1",
    }
    log = open(directory / "litellm.log", "wb")  # noqa: SIM115 - the child's
    process = subprocess.Popen(
        [str(LITELLM), "--config", str(config), "--port", str(port), "--num_workers", "1"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=directory,
    )
    target = Target(
        "litellm-proxy",
        f"http://127.0.0.1:{port}/v1",
        {"authorization": f"Bearer {LITELLM_KEY}"},
        "bench",
        process.pid,
        process,
    )
    try:
        asyncio.run(wait_ready(f"http://127.0.0.1:{port}/health/liveliness", process, 240))
    except RuntimeError:
        target.stop()
        raise
    return target


@dataclass
class Sample:
    """One measured batch: latencies (seconds), time to first chunk, wall time, server CPU."""

    latencies: list[float] = field(default_factory=list)
    first: list[float] = field(default_factory=list)
    wall: float = 0.0
    cpu: float = 0.0
    errors: int = 0


def body(model: str, i: int, stream: bool) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": f"Say hi to number {i} of the benchmark."}],
        "reasoning_effort": "low",
        "stream": stream,
    }


async def one_call(
    http: aiohttp.ClientSession, target: Target, i: int, stream: bool, sample: Sample
) -> None:
    started = time.perf_counter()
    try:
        async with http.post(
            f"{target.url}/chat/completions",
            json=body(target.model, i, stream),
            headers=target.headers,
        ) as answer:
            if answer.status != 200:
                await answer.read()
                sample.errors += 1
                return
            if not stream:
                await answer.read()
            else:
                first = None
                async for line in answer.content:
                    if first is None and line.startswith(b"data:") and b'"content":"' in line:
                        first = time.perf_counter() - started
                if first is None:
                    sample.errors += 1
                    return
                sample.first.append(first)
    except (aiohttp.ClientError, TimeoutError):
        sample.errors += 1
        return
    sample.latencies.append(time.perf_counter() - started)


async def run_batch(
    target: Target, *, concurrency: int, calls: int, stream: bool, start: int, warm: int
) -> Sample:
    sample = Sample()
    connector = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=120)
    ) as http:
        warm_sample = Sample()
        await _fan(http, target, concurrency, warm, stream, start, warm_sample)
        cpu = tree_cpu(target.pid) if target.pid else 0.0
        began = time.perf_counter()
        await _fan(http, target, concurrency, calls, stream, start + warm, sample)
        sample.wall = time.perf_counter() - began
        sample.cpu = (tree_cpu(target.pid) - cpu) if target.pid else 0.0
    return sample


async def _fan(
    http: aiohttp.ClientSession,
    target: Target,
    concurrency: int,
    calls: int,
    stream: bool,
    start: int,
    sample: Sample,
) -> None:
    counter = iter(range(start, start + calls))

    async def worker() -> None:
        for i in counter:
            await one_call(http, target, i, stream, sample)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summarise(samples: list[Sample], stream: bool) -> dict[str, Any]:
    latencies = [x for s in samples for x in s.latencies]
    firsts = [x for s in samples for x in s.first]
    calls = len(latencies)
    wall = sum(s.wall for s in samples)
    cpu = sum(s.cpu for s in samples)
    measured = firsts if stream else latencies
    return {
        "calls": calls,
        "errors": sum(s.errors for s in samples),
        "p50_ms": percentile(measured, 50) * 1000,
        "p99_ms": percentile(measured, 99) * 1000,
        "total_p50_ms": percentile(latencies, 50) * 1000,
        "rps": calls / wall if wall else 0.0,
        "cpu_ms_per_call": cpu / calls * 1000 if calls else float("nan"),
    }


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def measure(targets: list[Target], quick: bool) -> dict[str, Any]:
    plans = [
        # (concurrency, stream, calls per round, warm-up per round)
        (1, False, 60 if quick else 250, 20),
        (1, True, 40 if quick else 150, 10),
        (64, False, 400 if quick else 1600, 128),
        (64, True, 256 if quick else 960, 64),
    ]
    rounds = 2 if quick else 3
    results: dict[str, Any] = {}
    counter = 0
    for concurrency, stream, calls, warm in plans:
        key = f"c{concurrency}-{'stream' if stream else 'complete'}"
        pooled: dict[str, list[Sample]] = {t.name: [] for t in targets}
        for _ in range(rounds):
            for target in targets:
                sample = asyncio.run(
                    run_batch(
                        target,
                        concurrency=concurrency,
                        calls=calls,
                        stream=stream,
                        start=counter,
                        warm=warm,
                    )
                )
                counter += calls + warm
                pooled[target.name].append(sample)
        row = {name: summarise(samples, stream) for name, samples in pooled.items()}
        direct = row["direct"]
        for name, figures in row.items():
            if name != "direct":
                figures["added_p50_ms"] = figures["p50_ms"] - direct["p50_ms"]
                figures["added_p99_ms"] = figures["p99_ms"] - direct["p99_ms"]
        results[key] = row
        print(key, json.dumps(row, indent=None, default=lambda x: round(x, 3)), flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gateway", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer calls (about 2 minutes)")
    parser.add_argument("--out", default=str(HERE / "results" / "gateway.json"))
    parser.add_argument("--no-litellm", action="store_true", help="leave LiteLLM's proxy out")
    parser.add_argument("--no-redis", action="store_true", help="leave the Redis row out")
    args = parser.parse_args(argv)
    before = loadavg()
    directory = Path(tempfile.mkdtemp(prefix="polythink-gateway-bench-"))
    targets: list[Target] = []
    notes: list[str] = []
    redis_process = None
    with SimProcess() as sim:
        try:
            targets.append(Target("direct", f"{sim.root}/openai/v1", {}, "gpt-5.5"))
            targets.append(start_polythink(directory, sim.root, name="polythink-serve"))
            if not args.no_redis and shutil.which("redis-server"):
                from benchmarks.redisproc import RedisProcess

                redis_process = RedisProcess().start()
                targets.append(
                    start_polythink(
                        directory, sim.root, redis=redis_process.url, name="polythink-serve+redis"
                    )
                )
            if not args.no_litellm:
                litellm = start_litellm(directory, sim.root)
                if litellm is None:
                    notes.append(
                        f"LiteLLM's proxy is not installed at {LITELLM}: its rows are left out"
                    )
                else:
                    targets.append(litellm)
            results = measure(targets, args.quick)
        finally:
            for target in targets:
                target.stop()
            if redis_process is not None:
                redis_process.stop()
    report = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "loadavg_before": before,
            "loadavg_after": loadavg(),
        },
        "quick": args.quick,
        "notes": notes,
        "results": results,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    shutil.rmtree(directory, ignore_errors=True)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
