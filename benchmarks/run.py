"""The orchestrator: start the simulator, run every measurement in its own process, report.

``python -m benchmarks [--quick]`` or ``polythink bench [--quick]``. One run holds every
client, so the ratios between them hold even on a machine that other work slows down: each
measurement of the load and streaming scenarios is repeated ``reps`` times with the clients
in a rotated order, and the median of the repetitions is reported.

Outputs (``--out``, default ``benchmarks/results``): ``{mode}.json`` with every figure, the
machine and the load average before and after; ``{mode}-*.png`` charts; with
``--update-readme``, the results table in ``benchmarks/README.md``; with ``--chart PATH``,
the tier chart of :mod:`benchmarks.tiers`.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

from benchmarks.simproc import DEFAULT_SETTINGS, SimProcess
from benchmarks.workload import ANTHROPIC, OPENAI_CHAT, STREAM, TOOLS, Workload, workload

__all__ = ["SCALES", "SCENARIOS", "Scale", "main"]

ROOT = Path(__file__).resolve().parent
SCENARIOS = (
    "load",
    "layers",
    "conversation",
    "stream",
    "cache",
    "faults",
    "ratelimit",
    "memory",
    "import",
)

LOAD_CLIENTS = (
    "raw-httpx",
    "raw-aiohttp",
    "polythink-bare-httpx",
    "polythink-bare-aiohttp",
    "polythink-full-httpx",
    "polythink-full-aiohttp",
    "openai",
    "litellm",
    "raw-httpx@anthropic",
    "polythink-full-aiohttp@anthropic",
    "anthropic@anthropic",
)
"""``client`` on the OpenAI Chat wire, ``client@anthropic`` on the Anthropic Messages wire."""

LAYER_CLIENTS = (
    "raw-httpx",
    "polythink-bare-aiohttp",
    "polythink-client",
    "polythink-client+telemetry",
    "polythink-client+telemetry+cost",
    "polythink-client+limits",
    "polythink-client+cache",
    "polythink-client+budget",
    "polythink-client+user-layers",
    "polythink-full-aiohttp",
)
"""The layer breakdown: where polythink-full-aiohttp's CPU goes, one option group at a time."""

CONVERSATION_CLIENTS = (
    "raw-aiohttp",
    "raw-httpx",
    "polythink-default",
    "polythink-full-aiohttp",
    "openai",
)
"""The conversation-size scenario: growing conversations with 30 tools, one call at a time."""

STREAM_CLIENTS = (
    "raw-httpx",
    "raw-aiohttp",
    "polythink-bare-httpx",
    "polythink-bare-aiohttp",
    "polythink-full-httpx",
    "polythink-full-aiohttp",
    "openai",
    "litellm",
)
MEMORY_CLIENTS = (
    "raw-httpx",
    "polythink-bare-httpx",
    "polythink-full-httpx",
    "polythink-full-aiohttp",
    "openai",
)
QUICK_MEMORY_CLIENTS = ("raw-httpx", "polythink-full-httpx", "polythink-full-aiohttp")
FAULT_CLIENTS = ("raw-httpx", "polythink-full-httpx", "polythink-full-aiohttp", "openai")
CACHE_CLIENTS = ("polythink-full-aiohttp",)
RATELIMIT_CLIENTS = ("polythink-full-httpx", "polythink-full-aiohttp")
IMPORT_MODULES = (
    "httpx",
    "aiohttp",
    "httpx_aiohttp",
    "polythink",
    "openai",
    "anthropic",
    "litellm",
)

JOB_TIMEOUT = 600.0
"""Seconds a worker may take before it is ended and its measurement reported as failed."""

STREAM_DELTAS = 200
"""Text plus reasoning deltas in every stream of the streaming scenario."""

STREAM_CHUNK_DELAY = 0.005
"""Seconds between streamed chunks (200 chunks a second, a fast model). Each chunk then
arrives on its own, so every client pays for every chunk (with no delay, a client that
falls behind reads many chunks at once and looks cheaper per chunk than it is), and 16
streams leave a client's core mostly idle, so time to first delta is not queueing."""

FAULT_MIX = [
    {"status": 503},
    {"status": 503},
    {"status": 429, "retry_after_ms": 20},
]
"""Equally likely at a 15 % fault rate: 10 % 503 and 5 % 429 asking for a 20 ms wait."""


@dataclass(frozen=True)
class Scale:
    """How much each scenario does (counts of calls; seconds)."""

    reps: int
    load_n: int
    load_warmup: int
    stream_n: int
    memory_words: int
    memory_clients: tuple[str, ...]
    cache_n: int
    faults_n: int
    ratelimit_rpm: int
    ratelimit_seconds: float
    import_reps: int
    conversation_sizes: tuple[int, ...]
    conversation_calls: tuple[int, ...]
    agent_start: int
    agent_turns: int
    import_modules: tuple[str, ...] = IMPORT_MODULES
    stream_chunk_delay: float = STREAM_CHUNK_DELAY
    user_layer_calls: int = 200_000
    """Complete calls per chain and round of the in-process user-layer measurement."""


SCALES = {
    "smoke": Scale(
        reps=1,
        load_n=20,
        load_warmup=5,
        stream_n=4,
        memory_words=2_000,
        memory_clients=("raw-httpx", "polythink-full-aiohttp"),
        cache_n=20,
        faults_n=40,
        ratelimit_rpm=240,
        ratelimit_seconds=1.0,
        import_reps=1,
        conversation_sizes=(4, 12),
        conversation_calls=(3, 3),
        agent_start=4,
        agent_turns=6,
        import_modules=("httpx", "polythink"),
        stream_chunk_delay=0.001,
        user_layer_calls=2_000,
    ),
    "quick": Scale(
        reps=1,
        load_n=250,
        load_warmup=50,
        stream_n=16,
        memory_words=100_000,
        memory_clients=QUICK_MEMORY_CLIENTS,
        cache_n=200,
        faults_n=150,
        ratelimit_rpm=600,
        ratelimit_seconds=5.0,
        import_reps=2,
        conversation_sizes=(4, 100, 600),
        conversation_calls=(100, 40, 15),
        agent_start=100,
        agent_turns=60,
        stream_chunk_delay=0.002,
        user_layer_calls=100_000,
    ),
    "full": Scale(
        reps=3,
        load_n=1200,
        load_warmup=200,
        stream_n=96,
        memory_words=100_000,
        memory_clients=MEMORY_CLIENTS,
        cache_n=1000,
        faults_n=1000,
        ratelimit_rpm=1200,
        ratelimit_seconds=20.0,
        import_reps=5,
        conversation_sizes=(4, 100, 600, 3000),
        conversation_calls=(300, 150, 50, 15),
        agent_start=600,
        agent_turns=200,
    ),
}


def _split(client: str) -> tuple[str, str]:
    name, _, wire = client.partition("@")
    return name, wire or "openai_chat"


class Runner:
    """Run worker jobs one at a time and feed their progress to the display."""

    def __init__(self, sim: SimProcess, display: Any) -> None:
        self.sim = sim
        self.display = display
        self.workloads: dict[tuple[str, bool], Workload] = {}
        self.job_seconds: list[tuple[str, float]] = []
        """(label, wall seconds) of every job, worker start-up included."""

    def workload(self, wire: str, stream: bool) -> Workload:
        key = (wire, stream)
        if key not in self.workloads:
            spec = ANTHROPIC if wire == "anthropic" else (STREAM if stream else OPENAI_CHAT)
            self.workloads[key] = workload(*spec, stream=stream)
        return self.workloads[key]

    def job(
        self,
        label: str,
        client: str,
        kind: str,
        params: dict[str, Any],
        *,
        stream: bool = False,
        settings: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Run one job; return its last line (``result``, ``skipped`` or ``error``)."""
        name, wire = _split(client)
        job = {
            "client": name,
            "root": self.sim.root,
            "kind": kind,
            "workload": self.workload(wire, stream).as_json(),
            "params": params,
            "settings": {**DEFAULT_SETTINGS, **(settings or {})},
        }
        self.display.begin(label)
        began = time.perf_counter()
        with tempfile.TemporaryFile("w+") as errors:
            process = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
                cwd=ROOT.parent,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
            # A worker that hangs is ended, so a run always finishes.
            watchdog = threading.Timer(JOB_TIMEOUT, process.kill)
            watchdog.start()
            try:
                last = self._read(process, job)
            finally:
                watchdog.cancel()
            process.wait()
            errors.seek(0)
            tail = errors.read().strip().splitlines()[-1:]
        self.display.end()
        if not last:
            reason = tail[0] if tail else f"exit {process.returncode}"
            if process.returncode == -signal.SIGKILL:
                reason = f"no answer within {JOB_TIMEOUT:.0f} s"
            last = {"error": f"worker failed: {reason}"}
        self.job_seconds.append((label, round(time.perf_counter() - began, 2)))
        return last

    def user_layer_cost(self, calls: int) -> dict[str, Any]:
        """One user layer against the built-in Passthrough, in-process, in a fresh process
        (:mod:`benchmarks.user_layers`); ``{"error": ...}`` when it fails."""
        label = "layers · one user layer, in-process"
        self.display.begin(label)
        began = time.perf_counter()
        try:
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.user_layers", "--calls", str(calls)],
                capture_output=True,
                text=True,
                cwd=ROOT.parent,
                timeout=JOB_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            result: dict[str, Any] = {"error": f"no answer within {JOB_TIMEOUT:.0f} s"}
        else:
            tail = done.stderr.strip().splitlines()[-1:]
            try:
                result = json.loads(done.stdout)
            except ValueError:
                result = {"error": tail[0] if tail else f"exit {done.returncode}"}
        self.display.end()
        self.job_seconds.append((label, round(time.perf_counter() - began, 2)))
        return result

    def _read(self, process: subprocess.Popen[str], job: dict[str, Any]) -> dict[str, Any]:
        """Send the job; follow the progress lines; return the last other line."""
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.write(json.dumps(job))
        process.stdin.close()
        last: dict[str, Any] = {}
        for line in process.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if "progress" in message:
                self.display.advance(message["progress"], message["total"])
            else:
                last = message
        return last


def _median_result(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of every number across repetitions (nested dicts kept, others first)."""
    if len(runs) == 1:
        return runs[0]
    merged: dict[str, Any] = {}
    for key, value in runs[0].items():
        if isinstance(value, dict) and key != "faults_injected":
            merged[key] = _median_result([r[key] for r in runs])
        elif isinstance(value, int | float) and not isinstance(value, bool):
            merged[key] = statistics.median(r[key] for r in runs)
        else:
            merged[key] = value
    return merged


def _rotations(clients: Sequence[str], reps: int) -> list[tuple[int, str]]:
    order: list[tuple[int, str]] = []
    if not clients:
        return order
    for rep in range(reps):
        shift = rep % len(clients)
        order.extend((rep, c) for c in [*clients[shift:], *clients[:shift]])
    return order


def _repeated(
    scenario: str,
    clients: Sequence[str],
    reps: int,
    run: Callable[[str, str], dict[str, Any]],
) -> dict[str, Any]:
    results: dict[str, list[dict[str, Any]]] = {}
    skipped: dict[str, str] = {}
    errors: dict[str, str] = {}
    notes: set[str] = set()
    for rep, client in _rotations(clients, reps):
        if client in skipped or client in errors:
            continue
        outcome = run(client, f"{scenario} · {client} · run {rep + 1}/{reps}")
        if "result" in outcome:
            result = outcome["result"]
            notes.update(result.pop("notes", []))
            results.setdefault(client, []).append(result)
        elif "skipped" in outcome:
            skipped[client] = outcome["skipped"]
        else:
            errors[client] = outcome["error"]
    return {
        "clients": {c: _median_result(r) for c, r in results.items()},
        "skipped": skipped,
        "errors": errors,
        "notes": sorted(notes),
    }


def _single(
    scenario: str, clients: Sequence[str], run: Callable[[str, str], dict[str, Any]]
) -> dict[str, Any]:
    return _repeated(scenario, clients, 1, run)


def _expected_text(runner: Runner, wire: str) -> str:
    from benchmarks.workload import prompt
    from polythink.simulator import behaviour

    work = runner.workload(wire, False)
    return behaviour.answer_for(work.model, prompt(0), _effort(work), 12, []).text


def _effort(work: Workload) -> Any:
    from polythink.types import Effort

    return Effort.parse(work.effort)


def _stream_words(runner: Runner) -> int:
    """Answer words that make every stream carry exactly ``STREAM_DELTAS`` deltas."""
    from benchmarks.workload import prompt
    from polythink.simulator import behaviour

    work = runner.workload("openai_chat", True)
    reasoning = behaviour.reasoning_text(_effort(work), prompt(10_000))
    return STREAM_DELTAS - len(reasoning.split(" "))


def run_scenarios(
    runner: Runner, scale: Scale, scenarios: Sequence[str], only: set[str] | None
) -> dict[str, Any]:
    """Run the chosen scenarios; return their results keyed by scenario."""

    def chosen(clients: Sequence[str]) -> list[str]:
        return [c for c in clients if only is None or _split(c)[0] in only or c in only]

    out: dict[str, Any] = {}
    if "load" in scenarios:
        expected = {wire: _expected_text(runner, wire) for wire in ("openai_chat", "anthropic")}

        def load(client: str, label: str) -> dict[str, Any]:
            params = {
                "n": scale.load_n,
                "concurrency": [1, 64],
                "warmup": scale.load_warmup,
                "expected_text": expected[_split(client)[1]],
            }
            return runner.job(label, client, "load", params)

        out["load"] = _repeated("load", chosen(LOAD_CLIENTS), scale.reps, load)
    if "layers" in scenarios:

        def layers(client: str, label: str) -> dict[str, Any]:
            params = {"n": scale.load_n, "concurrency": [1], "warmup": scale.load_warmup}
            return runner.job(label, client, "load", params)

        out["layers"] = _repeated("layers", chosen(LAYER_CLIENTS), scale.reps, layers)
        out["layers"]["user_layer"] = runner.user_layer_cost(scale.user_layer_calls)
    if "conversation" in scenarios:

        def converse(client: str, label: str) -> dict[str, Any]:
            params = {
                "sizes": list(scale.conversation_sizes),
                "calls": list(scale.conversation_calls),
                "warmup": 2,
                "agent_start": scale.agent_start,
                "turns": scale.agent_turns,
            }
            return runner.job(label, client, "conversation", params)

        out["conversation"] = _repeated(
            "conversation", chosen(CONVERSATION_CLIENTS), scale.reps, converse
        )
        out["conversation"]["tools"] = TOOLS
    if "stream" in scenarios:
        words = _stream_words(runner)

        def stream(client: str, label: str) -> dict[str, Any]:
            params = {
                "n": scale.stream_n,
                "concurrency": 16,
                "warmup": 16,
                "deltas_per_stream": STREAM_DELTAS,
            }
            return runner.job(
                label,
                client,
                "stream",
                params,
                stream=True,
                settings={"answer_words": words, "chunk_delay": scale.stream_chunk_delay},
            )

        out["stream"] = _repeated("stream", chosen(STREAM_CLIENTS), scale.reps, stream)
        out["stream"]["deltas_per_stream"] = STREAM_DELTAS
        out["stream"]["concurrency"] = 16
        out["stream"]["chunk_delay"] = scale.stream_chunk_delay
    if "cache" in scenarios:

        def cache(client: str, label: str) -> dict[str, Any]:
            return runner.job(label, client, "cache", {"n": scale.cache_n})

        out["cache"] = _single("cache", chosen(CACHE_CLIENTS), cache)
    if "faults" in scenarios:

        def faults(client: str, label: str) -> dict[str, Any]:
            params = {"n": scale.faults_n, "concurrency": 8, "rate": 0.15, "mix": FAULT_MIX}
            return runner.job(label, client, "faults", params)

        out["faults"] = _single("faults", chosen(FAULT_CLIENTS), faults)
        out["faults"]["mix"] = "15 % of calls: 10 % 503, 5 % 429 with retry-after-ms 20"
    if "ratelimit" in scenarios:
        rpm = scale.ratelimit_rpm
        # The bucket starts with one minute's worth (the burst), then refills at the limit's
        # pace: the worker sends the burst, then about ratelimit_seconds of steady traffic.
        steady = max(10, round(rpm / 60 * scale.ratelimit_seconds))

        def ratelimit(client: str, label: str) -> dict[str, Any]:
            params = {
                "steady": steady,
                "callers": 32,
                "rpm": rpm,
                "max_concurrency": 8,
            }
            return runner.job(label, client, "ratelimit", params, settings={"latency": 0.01})

        out["ratelimit"] = _single("ratelimit", chosen(RATELIMIT_CLIENTS), ratelimit)
    if "memory" in scenarios:

        def memory(client: str, label: str) -> dict[str, Any]:
            return runner.job(label, client, "memory", {"words": scale.memory_words}, stream=True)

        out["memory"] = _single("memory", chosen(scale.memory_clients), memory)
        out["memory"]["words"] = scale.memory_words
    if "import" in scenarios:
        out["import"] = import_times(scale.import_modules, scale.import_reps, runner.display)
    return out


def _importtime(module: str | None, bytecode: str | None = None) -> dict[str, float]:
    """Cumulative seconds per module that ``import module`` loads (``python -X importtime``);
    ``None``: what the interpreter loads by itself. With ``bytecode`` (a directory), modules
    load from bytecode kept there (``PYTHONPYCACHEPREFIX``), written by the first import."""
    env = dict(os.environ)
    if bytecode is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = bytecode
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}" if module else "pass"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT.parent,
        env=env,
    )
    cumulative: dict[str, float] = {}
    for line in done.stderr.splitlines():
        parts = line.split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        name = parts[2].strip()
        cumulative[name] = max(cumulative.get(name, 0.0), int(parts[1]) / 1e6)
    return cumulative


def import_times(modules: Sequence[str], reps: int, display: Any) -> dict[str, Any]:
    """Seconds ``import M`` takes in a fresh interpreter, the fastest of ``reps`` runs.

    The figure is the module's cumulative time as ``python -X importtime`` reports it: the
    import alone, without the interpreter's start-up or the process spawn, whose noise on a
    shared machine is larger than the differences measured. Every module loads from
    bytecode, as an installed package does (pip compiles it when it installs): the bytecode
    is kept in a directory of this run, written by one untimed import of each module first,
    so a source checkout (whose modules an environment with ``PYTHONDONTWRITEBYTECODE``
    would compile on every import) is measured as it will be installed.
    """
    skipped = {m: f"{m} is not installed" for m in modules if importlib.util.find_spec(m) is None}
    available = [m for m in modules if m not in skipped]
    samples: dict[str, list[float]] = {m: [] for m in available}
    heaviest: dict[str, float] = {}
    bytecode = tempfile.mkdtemp(prefix="polythink-bench-bytecode-")
    startup = set(_importtime(None, bytecode))
    display.begin(f"import · {len(available)} modules × {reps}")
    for module in available:
        _importtime(module, bytecode)
    done = 0
    for _ in range(reps):
        for module in available:
            cumulative = _importtime(module, bytecode)
            samples[module].append(cumulative.get(module, 0.0))
            if module == "polythink" and not heaviest:
                heaviest = {
                    name: value
                    for name, value in cumulative.items()
                    if "." not in name and name != module and name not in startup
                }
            done += 1
            display.advance(done, reps * len(available))
    display.end()
    shutil.rmtree(bytecode, ignore_errors=True)
    return {
        "seconds": {m: min(values) for m, values in samples.items()},
        "reps": reps,
        "skipped": skipped,
        "polythink_heaviest": sorted(heaviest.items(), key=lambda item: -item[1])[:6],
        "from_bytecode": True,
    }


def machine() -> dict[str, Any]:
    """What the run ran on: CPU model, cores, memory, OS, Python, package versions."""
    cpu = platform.processor() or platform.machine()
    with_cpuinfo = Path("/proc/cpuinfo")
    if with_cpuinfo.exists():
        for line in with_cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory = None
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        first = meminfo.read_text().splitlines()[0].split()
        memory = round(int(first[1]) / 1024 / 1024, 1)
    versions: dict[str, str | None] = {}
    for package in (
        "polythink",
        "httpx",
        "aiohttp",
        "httpx-aiohttp",
        "opentelemetry-sdk",
        "openai",
        "anthropic",
        "litellm",
        "httpx2",
    ):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": memory,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "versions": versions,
    }


class Display:
    """Rich progress bars: one for the whole run, one for the job in flight."""

    def __init__(self, total_jobs: int, quiet: bool) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            disable=quiet,
            transient=False,
        )
        self.overall = self.progress.add_task("benchmark", total=total_jobs)
        self.current: Any = None

    def __enter__(self) -> Display:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def begin(self, label: str) -> None:
        self.current = self.progress.add_task(f"  {label}", total=None)

    def advance(self, done: int, total: int) -> None:
        if self.current is not None:
            self.progress.update(self.current, completed=done, total=total)

    def end(self) -> None:
        if self.current is not None:
            self.progress.remove_task(self.current)
            self.current = None
        self.progress.advance(self.overall)


def _job_count(scale: Scale, scenarios: Sequence[str], only: set[str] | None) -> int:
    def count(clients: Sequence[str]) -> int:
        return len([c for c in clients if only is None or _split(c)[0] in only or c in only])

    jobs = 0
    for scenario, clients, reps in (
        ("load", LOAD_CLIENTS, scale.reps),
        ("layers", LAYER_CLIENTS, scale.reps),
        ("conversation", CONVERSATION_CLIENTS, scale.reps),
        ("stream", STREAM_CLIENTS, scale.reps),
        ("cache", CACHE_CLIENTS, 1),
        ("faults", FAULT_CLIENTS, 1),
        ("ratelimit", RATELIMIT_CLIENTS, 1),
        ("memory", scale.memory_clients, 1),
    ):
        if scenario in scenarios:
            jobs += count(clients) * reps
    return jobs + ("import" in scenarios)


class _Parser(argparse.ArgumentParser):
    """A parser whose usage errors are one line on stderr and exit 2, as polythink's own."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def clients_named() -> dict[str, tuple[str, ...]]:
    """Every client a run may name in ``--clients``: its full name (``raw-httpx@anthropic``),
    and its name without the wire, which chooses it on every wire."""
    lists = (
        LOAD_CLIENTS,
        LAYER_CLIENTS,
        CONVERSATION_CLIENTS,
        STREAM_CLIENTS,
        MEMORY_CLIENTS,
        QUICK_MEMORY_CLIENTS,
        FAULT_CLIENTS,
        CACHE_CLIENTS,
        RATELIMIT_CLIENTS,
    )
    named: dict[str, tuple[str, ...]] = {}
    for client in dict.fromkeys(c for clients in lists for c in clients):
        for name in (client, _split(client)[0]):
            named[name] = (*named.get(name, ()), client)
    return named


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="polythink bench",
        description="Benchmark polythink against raw httpx and the peer SDKs on the simulator.",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="a short run (under 2 minutes)")
    mode.add_argument(
        "--smoke", action="store_true", help="a tiny run that only checks the harness"
    )
    parser.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help=f"comma-separated subset of: {', '.join(SCENARIOS)}",
    )
    parser.add_argument(
        "--clients",
        help="comma-separated subset of the clients (default: all); names as in the table",
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT / "results", help="directory for JSON and charts"
    )
    parser.add_argument(
        "--update-readme", action="store_true", help="write the table into benchmarks/README.md"
    )
    parser.add_argument(
        "--chart",
        type=Path,
        metavar="PATH",
        help="also write a PNG of reasoning tokens and cost per applied tier for the models "
        "the run called, each asked every tier once (the chart of polythink demo --chart)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; return 0, or 2 for bad arguments."""
    from benchmarks import report

    parser = _parser()
    args = parser.parse_args(argv)
    # LiteLLM fetches its model price list from the network at import unless told to use the
    # copy it ships; every process started from here inherits this.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # Nor does polythink refresh its model catalogues in a background thread while measuring.
    os.environ.setdefault("POLYTHINK_REFRESH", "off")
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = [s for s in scenarios if s not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario {unknown[0]!r}; accepted: {', '.join(SCENARIOS)}")
    if not scenarios:
        parser.error(f"no scenario given; accepted: {', '.join(SCENARIOS)}")
    only: set[str] | None = None
    if args.clients is not None:
        only = {c.strip() for c in args.clients.split(",") if c.strip()}
        named = clients_named()
        strange = sorted(only - named.keys())
        if strange or not only:
            parser.error(
                f"unknown client {strange[0] if strange else args.clients!r}; accepted: "
                + ", ".join(sorted(named))
            )
    mode = "smoke" if args.smoke else ("quick" if args.quick else "full")
    scale = SCALES[mode]
    if only is not None and not _job_count(scale, scenarios, only):
        parser.error(
            f"none of the clients {', '.join(sorted(only))} runs in the scenarios "
            f"{', '.join(scenarios)}"
        )
    started = time.time()
    results: dict[str, Any] = {
        "mode": mode,
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_average_before": list(os.getloadavg()),
        "scale": asdict(scale),
    }
    with (
        SimProcess() as sim,
        Display(_job_count(scale, scenarios, only), args.quiet) as display,
    ):
        runner = Runner(sim, display)
        results["scenarios"] = run_scenarios(runner, scale, scenarios, only)
        results["job_seconds"] = runner.job_seconds
        results["workloads"] = {
            f"{wire}{'-stream' if stream else ''}": w.as_json()
            for (wire, stream), w in runner.workloads.items()
        }
        if args.chart is not None:
            from benchmarks.tiers import tier_chart

            called = dict.fromkeys((w.provider, w.model) for w in runner.workloads.values())
            if called:
                args.chart.parent.mkdir(parents=True, exist_ok=True)
                results["tier_chart"] = tier_chart(sim.root, list(called), args.chart)
            else:
                results["tier_chart"] = {"skipped": "the chosen scenarios called no model"}
    results["load_average_after"] = list(os.getloadavg())
    results["duration_seconds"] = round(time.time() - started, 1)
    results["targets"] = report.targets(results["scenarios"])
    args.out.mkdir(parents=True, exist_ok=True)
    json_path = args.out / f"{mode}.json"
    json_path.write_text(json.dumps(results, indent=2) + "\n")
    charts = report.charts(results, args.out, mode)
    results["charts"] = [str(p) for p in charts]
    json_path.write_text(json.dumps(results, indent=2) + "\n")
    report.print_tables(results)
    if args.update_readme:
        report.update_readme(results, ROOT / "README.md")
    print(
        f"results: {json_path}"
        + (f"; charts: {', '.join(p.name for p in charts)}" if charts else "")
    )
    if "path" in results.get("tier_chart", {}):
        print(f"tier chart: {results['tier_chart']['path']}")
    return 0
