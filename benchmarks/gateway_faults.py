"""``polythink serve`` under faults: a worker killed mid-stream, Redis killed and restarted
under load, an upstream that hangs, and 10,000 idle connections.

Every scenario runs real processes on loopback: the simulator (:mod:`benchmarks.simproc`),
a persistent redis-server (each write synced, as a production server configured so), and
``polythink serve`` (two workers under gunicorn where the scenario needs a fleet). Figures go
to ``benchmarks/results/gateway-faults.json``; ``docs/guides/gateway-production.md`` quotes
them.

    python -m benchmarks.gateway_faults [--only killed,redis,hang,idle]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import httpx

from benchmarks.gateway import BENCH_KEY, free_port, loadavg, tree_rss, wait_ready
from benchmarks.redisproc import RedisProcess
from benchmarks.simproc import SimProcess

HERE = Path(__file__).resolve().parent
POLYTHINK = str(Path(sys.executable).parent / "polythink")
HEADERS = {"authorization": f"Bearer {BENCH_KEY}"}


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def write_config(directory: Path, text: str) -> Path:
    path = directory / f"gateway-{time.monotonic_ns()}.toml"
    path.write_text(text)
    return path


class Gateway:
    """One ``polythink serve`` process (a fleet's master when ``workers`` > 1)."""

    def __init__(self, directory: Path, text: str, *, workers: int = 1) -> None:
        self.port = free_port()
        config = write_config(directory, text.replace("PORT", str(self.port)))
        command = [POLYTHINK, "serve", "--config", str(config)]
        if workers > 1:
            command += ["--workers", str(workers)]
        env = {**os.environ, "BENCH_GATEWAY_KEY": BENCH_KEY}
        self.log = directory / f"gateway-{self.port}.log"
        self.process = subprocess.Popen(
            command,
            stdout=open(self.log, "wb"),  # noqa: SIM115 - the child's
            stderr=subprocess.STDOUT,
            env=env,
        )
        asyncio.run(wait_ready(f"{self.root}/health", self.process, 120))
        if workers > 1:
            deadline = time.monotonic() + 60
            while len(children(self.process.pid)) < workers:
                assert time.monotonic() < deadline, "the workers did not start"
                time.sleep(0.1)

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def fleet_config(sim: str, redis: str, *, rpm: int, usd: float, drain: float = 30) -> str:
    return f"""limits = "{redis}?workers=2"
cache = "{redis}"

[[source]]
provider = "openai"
model = "gpt-5.5"
base_url = "{sim}/openai/v1"
api_key = "sk-bench-upstream-0123456789"

[[route]]
name = "bench"
sources = ["openai/gpt-5.5"]

[serve]
port = PORT
drain_timeout = {drain}

[[tenant]]
name = "bench"
key_env = "BENCH_GATEWAY_KEY"
rpm = {rpm}

[[tenant.budget]]
usd = {usd}
per = "day"
"""


async def stream_call(root: str, i: int, outcome: dict[str, Any]) -> None:
    """A raw streamed Chat call: its chunks, its end ([DONE], an error chunk, or a cut),
    and the cost polythink's trailer reports."""
    body = {
        "model": "bench",
        "messages": [{"role": "user", "content": f"Tell a long story {i} {time.time_ns()}."}],
        "stream": True,
        "reasoning_effort": "low",
        "max_completion_tokens": 600,
    }
    chunks = 0
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"{root}/v1/chat/completions", json=body, headers=HEADERS) as answer,
        ):
            outcome["status"] = answer.status
            async for line in answer.content:
                if line.startswith(b"data: [DONE]"):
                    outcome["end"] = "done"
                elif line.startswith(b'data: {"error"'):
                    outcome["end"] = "error event"
                    outcome["error"] = json.loads(line[6:])["error"]["message"]
                elif line.startswith(b"data:"):
                    chunks += 1
                elif line.startswith(b": polythink "):
                    outcome["cost"] = json.loads(line[len(b": polythink ") :])["cost_usd"]
    except (aiohttp.ClientError, ConnectionError) as exc:
        outcome["end"] = f"cut ({type(exc).__name__})"
    outcome["chunks"] = chunks
    outcome.setdefault("end", "cut (no end)")


def budget_spent(redis: RedisProcess, line: str) -> float:
    import redis as redis_py

    with redis_py.Redis(port=redis.port) as client:
        value = client.hget(f"polythink:{{polythink-budget}}:{line}", "s")
    return int(value or 0) / 1e9


def killed_worker(directory: Path) -> dict[str, Any]:
    """Streams under way on a 2-worker fleet; one worker gets SIGKILL, later the master gets
    SIGTERM with a 1 s drain. What each client saw, and what the tenant's budget counted."""
    results: dict[str, Any] = {}
    with SimProcess() as sim, RedisProcess(persist=True) as redis:
        httpx.post(f"{sim.root}/_bench/settings", json={"chunk_delay": 0.05, "answer_words": 60})
        config = fleet_config(sim.root, redis.url, rpm=100000, usd=1000.0, drain=1.0)
        gateway = Gateway(directory, config, workers=2)
        try:
            for phase in ("sigkill-one-worker", "sigterm-master-drain-1s"):
                outcomes = [dict[str, Any]() for _ in range(16)]
                workers = children(gateway.process.pid)
                acted = asyncio.run(_streams_then(gateway, outcomes, phase, workers[0]))
                if phase == "sigkill-one-worker":
                    deadline = time.monotonic() + 60
                    while True:
                        now = children(gateway.process.pid)
                        if len(now) == 2 and workers[0] not in now:
                            break
                        assert time.monotonic() < deadline, "no replacement worker"
                        time.sleep(0.05)
                    replaced = round(time.monotonic() - acted, 2)
                ends: dict[str, int] = {}
                for outcome in outcomes:
                    ends[outcome["end"]] = ends.get(outcome["end"], 0) + 1
                results[phase] = {
                    "streams": len(outcomes),
                    "ends": ends,
                    "error_messages": sorted({o["error"] for o in outcomes if "error" in o}),
                    "finished_streams_cost_usd": round(
                        sum(o.get("cost") or 0 for o in outcomes), 9
                    ),
                }
                if phase == "sigkill-one-worker":
                    results[phase]["replacement_up_after_kill_s"] = replaced
            results["budget_counted_usd"] = round(budget_spent(redis, "day:tag=bench:bench"), 9)
        finally:
            gateway.stop()
    return results


async def _streams_then(
    gateway: Gateway, outcomes: list[dict[str, Any]], phase: str, victim: int
) -> float:
    """Start a stream per outcome, one connection at a time (either worker may take each),
    then kill ``victim`` or stop the master; return when that happened (monotonic)."""
    tasks = []
    for i, outcome in enumerate(outcomes):
        tasks.append(asyncio.create_task(stream_call(gateway.root, i, outcome)))
        await asyncio.sleep(0.03)
    await asyncio.sleep(0.5)  # every stream under way (60 chunks, 50 ms apart)
    acted = time.monotonic()
    if phase == "sigkill-one-worker":
        os.kill(victim, signal.SIGKILL)
    else:
        gateway.process.send_signal(signal.SIGTERM)
    await asyncio.gather(*tasks)
    return acted


def redis_outage(directory: Path) -> dict[str, Any]:
    """Two runs on a 2-worker fleet sharing limits through Redis (``?workers=2``), each 10
    calls a second for 30 s with Redis killed at 8 s and started again at 18 s (its data on
    disk): a tenant at 120 requests a minute (and a large budget), then a tenant with a
    $0.25 budget (and no rate limit)."""
    return {
        "rpm": _outage_run(directory, rpm=120, usd=1000.0),
        "budget": _outage_run(directory, rpm=100_000_000, usd=0.25),
    }


def _outage_run(directory: Path, *, rpm: int, usd: float) -> dict[str, Any]:
    statuses: list[tuple[float, int, float]] = []
    with SimProcess() as sim, RedisProcess(persist=True) as redis:
        gateway = Gateway(directory, fleet_config(sim.root, redis.url, rpm=rpm, usd=usd), workers=2)
        try:
            asyncio.run(_outage_load(gateway, redis, statuses))
        finally:
            gateway.stop()
    took = max(at for at, _, _ in statuses)
    allowed = [s for s in statuses if s[1] == 200]
    row: dict[str, Any] = {
        "sent": len(statuses),
        "seconds": round(took, 1),
        "ok": len(allowed),
        "ok_before_outage": sum(1 for s in allowed if s[0] < 8),
        "ok_during_outage": sum(1 for s in allowed if 8 <= s[0] < 18),
        "ok_after_outage": sum(1 for s in allowed if s[0] >= 18),
        "refused_429": sum(1 for s in statuses if s[1] == 429),
        "other": sum(1 for s in statuses if s[1] not in (200, 429)),
    }
    if rpm < 1000:
        row["rpm"] = rpm
        row["rpm_limit_allows"] = round(rpm + rpm * took / 60, 1)
    else:
        row["budget_usd"] = usd
        row["spent_usd"] = round(sum(s[2] for s in allowed), 6)
    return row


async def _outage_load(
    gateway: Gateway, redis: RedisProcess, statuses: list[tuple[float, int, float]]
) -> None:
    started = time.monotonic()
    async with aiohttp.ClientSession() as http:

        async def one(i: int) -> None:
            body = {
                "model": "bench",
                "messages": [{"role": "user", "content": f"hi {i} {time.time_ns()}"}],
                "reasoning_effort": "low",
                "max_completion_tokens": 64,
            }
            at = time.monotonic() - started
            try:
                async with http.post(
                    f"{gateway.root}/v1/chat/completions", json=body, headers=HEADERS
                ) as answer:
                    await answer.read()
                    cost = float(answer.headers.get("x-polythink-cost-usd", "0") or 0)
                    statuses.append((at, answer.status, cost))
            except aiohttp.ClientError:
                statuses.append((at, 0, 0.0))

        tasks = []
        for i in range(300):
            if i == 80:
                redis.stop()
            if i == 180:
                redis.start()
            tasks.append(asyncio.create_task(one(i)))
            await asyncio.sleep(0.1)
        await asyncio.gather(*tasks)


def hanging_upstream(directory: Path) -> dict[str, Any]:
    """A route whose first source accepts connections and never answers (timeout 1 s), its
    second the simulator: every call is answered by the second, about 1 s late."""
    hang = socket.socket()
    hang.bind(("127.0.0.1", 0))
    hang.listen(1000)
    port = hang.getsockname()[1]
    try:
        with SimProcess() as sim:
            text = f"""[[source]]
provider = "openai"
model = "gpt-5.5"
base_url = "http://127.0.0.1:{port}/v1"
api_key = "sk-bench-upstream-0123456789"
timeout = 1.0
max_retries = 0

[[source]]
provider = "deepseek"
model = "deepseek-v4-pro"
base_url = "{sim.root}/deepseek/v1"
api_key = "sk-bench-upstream-0123456789"

[[route]]
name = "bench"
sources = ["openai/gpt-5.5", "deepseek/deepseek-v4-pro"]

[serve]
port = PORT
"""
            gateway = Gateway(directory, text)
            rows = []
            try:
                for stream in (False, True, False, True):
                    started = time.monotonic()
                    answer = httpx.post(
                        f"{gateway.root}/v1/chat/completions",
                        json={
                            "model": "bench",
                            "messages": [{"role": "user", "content": "hi"}],
                            "stream": stream,
                        },
                        timeout=30,
                    )
                    rows.append(
                        {
                            "stream": stream,
                            "status": answer.status_code,
                            "source": answer.headers.get("x-polythink-source"),
                            "seconds": round(time.monotonic() - started, 3),
                        }
                    )
            finally:
                gateway.stop()
    finally:
        hang.close()
    return {"calls": rows}


def idle_connections(directory: Path, count: int = 10_000) -> dict[str, Any]:
    """``count`` idle connections held open to one worker; calls before and during, its RSS."""
    with SimProcess() as sim:
        text = f"""[[source]]
provider = "openai"
model = "gpt-5.5"
base_url = "{sim.root}/openai/v1"
api_key = "sk-bench-upstream-0123456789"

[[route]]
name = "bench"
sources = ["openai/gpt-5.5"]

[serve]
port = PORT
idle_timeout = 120
"""
        gateway = Gateway(directory, text)
        try:

            def timed(n: int) -> list[float]:
                took = []
                with httpx.Client(timeout=30) as http:
                    for i in range(n):
                        started = time.perf_counter()
                        answer = http.post(
                            f"{gateway.root}/v1/chat/completions",
                            json={
                                "model": "bench",
                                "messages": [{"role": "user", "content": f"hi {i}"}],
                            },
                        )
                        assert answer.status_code == 200
                        took.append(time.perf_counter() - started)
                return sorted(took)

            before = timed(200)
            rss_before = tree_rss(gateway.process.pid)

            async def hold() -> tuple[int, list[float], int]:
                sockets: list[asyncio.StreamWriter] = []
                limit = asyncio.Semaphore(256)

                async def connect() -> None:
                    async with limit:
                        _, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
                        sockets.append(writer)

                results = await asyncio.gather(
                    *(connect() for _ in range(count)), return_exceptions=True
                )
                failed = sum(1 for r in results if isinstance(r, BaseException))
                await asyncio.sleep(2)
                rss = tree_rss(gateway.process.pid)
                during = await asyncio.to_thread(timed, 200)
                for writer in sockets:
                    writer.close()
                return len(sockets), during, rss + 0 * failed

            held, during, rss_during = asyncio.run(hold())
        finally:
            gateway.stop()

    def p(values: list[float], q: float) -> float:
        return round(values[min(len(values) - 1, round(q * (len(values) - 1)))] * 1000, 3)

    return {
        "idle_connections_held": held,
        "call_p50_ms_before": p(before, 0.5),
        "call_p99_ms_before": p(before, 0.99),
        "call_p50_ms_during": p(during, 0.5),
        "call_p99_ms_during": p(during, 0.99),
        "rss_mib_before": round(rss_before / 2**20, 1),
        "rss_mib_during": round(rss_during / 2**20, 1),
        "kib_per_idle_connection": round((rss_during - rss_before) / max(held, 1) / 1024, 2),
    }


SCENARIOS = {
    "killed": killed_worker,
    "redis": redis_outage,
    "hang": hanging_upstream,
    "idle": idle_connections,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.gateway_faults", description=__doc__
    )
    parser.add_argument("--only", default=",".join(SCENARIOS))
    parser.add_argument("--out", default=str(HERE / "results" / "gateway-faults.json"))
    args = parser.parse_args(argv)
    directory = Path(tempfile.mkdtemp(prefix="polythink-gateway-faults-"))
    report: dict[str, Any] = {"loadavg_before": loadavg()}
    for name in args.only.split(","):
        print(f"{name} …", flush=True)
        report[name] = SCENARIOS[name](directory)
        print(json.dumps(report[name], indent=2), flush=True)
    report["loadavg_after"] = loadavg()
    out = Path(args.out)
    if out.exists() and args.only != ",".join(SCENARIOS):
        kept = json.loads(out.read_text())
        kept.update(report)
        report = kept
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
