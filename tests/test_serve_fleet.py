"""Two tenants on a 4-worker gateway over a real Redis and Prometheus: ``deploy/stack.py``
as documented (``make stack``), with a configuration of this test's own.

The stack runs the provider simulator, redis-server, ``polythink serve --workers 4`` (the
image's command) and Prometheus on free loopback ports. Every request here opens a new
connection, so the kernel hands them to any of the four workers: what one tenant may do is
counted in Redis, whichever worker serves it. ``acme`` has a small budget that steps its
tiers down and then refuses it; ``globex`` a large one and 12 requests a minute. Neither
reads the other's cache entries. The gateway row of ``dashboards/polythink.json`` is run on
the stack's Prometheus, and a worker killed with SIGKILL is replaced.
"""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import pytest

from tests.conftest import ROOT
from tests.deploy_support import image_command
from tests.redis_support import redis_binary
from tests.test_dashboard_prometheus import (
    GATEWAY_ROW,
    PROMETHEUS,
    Prometheus,
    Window,
    _by,
    _expr,
    _panels,
    require_prometheus,
)

TEMPLATE = """
limits = "redis://redis:6379/0?workers=4"
cache = "redis://redis:6379/0"

[[source]]
provider = "openai"
model = "gpt-5.5"

[[route]]
name = "fast"
sources = ["openai/gpt-5.5"]

[serve]
host = "0.0.0.0"
port = 4000

[[tenant]]
name = "acme"
key_env = "ACME_GATEWAY_KEY"

[[tenant.budget]]
usd = 0.08
per = "day"
step_down_at = 0.2

[[tenant]]
name = "globex"
key_env = "GLOBEX_GATEWAY_KEY"
rpm = 12

[[tenant.budget]]
usd = 100.0
per = "day"
step_down_at = 0.8

[[tenant]]
name = "initech"
key_env = "INITECH_GATEWAY_KEY"

[[tenant.budget]]
usd = 100.0
per = "day"
step_down_at = 0.8
"""
PROMPT = "Why is the sky blue? Answer in one sentence."


@dataclass
class Stack:
    gateway: str
    prometheus: Prometheus
    keys: dict[str, str]
    master: int

    def headers(self, tenant: str | None) -> dict[str, str]:
        key = (
            self.keys[f"{tenant.upper()}_GATEWAY_KEY"] if tenant else "pt-not-a-key-of-this-gateway"
        )
        return {"authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    redis_binary()
    require_prometheus(PROMETHEUS)
    home = tmp_path_factory.mktemp("stack")
    template = home / "template.toml"
    template.write_text(TEMPLATE)
    run = home / "run"
    env = {k: v for k, v in os.environ.items() if not k.endswith("_GATEWAY_KEY")}
    process = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "deploy" / "stack.py"),
            "--config",
            str(template),
            "--dir",
            str(run),
            "--workers",
            "4",
            *("--port", "0", "--redis-port", "0", "--prometheus-port", "0"),
            *("--simulator-port", "0"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        deadline = time.monotonic() + 180
        while not (run / "stack.json").exists():
            if process.poll() is not None:
                pytest.fail(
                    f"the stack exited: {process.stderr.read().decode() if process.stderr else ''}"
                )
            assert time.monotonic() < deadline, "the stack was not up within 180 s"
            time.sleep(0.2)
        described = json.loads((run / "stack.json").read_text())
        keys = dict(
            line.split("=", 1) for line in (run / "keys.env").read_text().splitlines() if line
        )
        yield Stack(
            gateway=described["gateway"],
            prometheus=Prometheus(described["prometheus"]),
            keys=keys,
            master=described["pids"]["gateway"],
        )
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def _chat(
    stack: Stack, tenant: str | None, *, effort: str = "high", prompt: str = PROMPT
) -> httpx.Response:
    # A connection per request: the kernel gives it to any worker.
    async with httpx.AsyncClient(timeout=60) as http:
        return await http.post(
            f"{stack.gateway}/v1/chat/completions",
            headers=stack.headers(tenant),
            json={
                "model": "fast",
                "messages": [{"role": "user", "content": prompt}],
                "reasoning_effort": effort,
                "max_completion_tokens": 400,
            },
        )


def _workers(stack: Stack, **labels: str) -> set[str]:
    """The worker labels of the gateway's request series with ``labels``."""
    text = httpx.get(f"{stack.gateway}/metrics", timeout=30).text
    found = set()
    for line in text.splitlines():
        if not line.startswith("http_server_request_duration_seconds_count{"):
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', line))
        if all(got.get(k) == v for k, v in labels.items()):
            found.add(got["worker"])
    return found


def _spread(stack: Stack, tenant: str) -> set[str]:
    """The workers that answered ``tenant``, once at least two did: the kernel hands each new
    connection to whichever worker it wakes, and a busy machine may wake the same one for a
    whole burst, so a few more calls go out (8 at a time, at most 10 times) until a second
    worker has answered. Its answers (a refusal, as the tenant's limit or budget is spent by
    then) come from the fleet's shared state, not from anything that worker counted."""
    seen = _workers(stack, polythink_tenant=tenant)

    async def more() -> None:
        async with anyio.create_task_group() as group:
            for i in range(8):
                group.start_soon(functools.partial(_chat, stack, tenant, prompt=f"spread {i}"))

    for _ in range(10):
        if len(seen) >= 2:
            break
        anyio.run(more)
        seen = _workers(stack, polythink_tenant=tenant)
    return seen


def test_a_tenant_never_reads_the_cache_entries_of_another(stack: Stack) -> None:
    prompt = "What is the capital of Portugal? (cache check)"

    async def calls() -> list[httpx.Response]:
        return [
            await _chat(stack, "acme", effort="low", prompt=prompt),
            await _chat(stack, "initech", effort="low", prompt=prompt),
            await _chat(stack, "acme", effort="low", prompt=prompt),
            await _chat(stack, "initech", effort="low", prompt=prompt),
        ]

    first_acme, first_initech, again_acme, again_initech = anyio.run(calls)
    for answer in (first_acme, first_initech, again_acme, again_initech):
        assert answer.status_code == 200, answer.text
    assert first_acme.headers["x-polythink-cache"] == "miss"
    assert first_initech.headers["x-polythink-cache"] == "miss"  # acme's entry is not initech's
    assert again_acme.headers["x-polythink-cache"] == "hit"
    assert again_initech.headers["x-polythink-cache"] == "hit"
    acme_text = first_acme.json()["choices"][0]["message"]["content"]
    assert again_acme.json()["choices"][0]["message"]["content"] == acme_text


def test_each_tenant_is_held_to_its_own_limits_and_budget_across_the_workers(
    stack: Stack,
) -> None:
    async def burst() -> tuple[list[httpx.Response], float]:
        answers: list[httpx.Response] = []
        started = time.monotonic()

        async def one(i: int) -> None:
            answers.append(await _chat(stack, "globex", prompt=f"burst {i}"))

        async with anyio.create_task_group() as group:
            for i in range(18):
                group.start_soon(one, i)
        return answers, time.monotonic() - started

    answers, took = anyio.run(burst)
    statuses = Counter(a.status_code for a in answers)
    # 12 a minute, the bucket full at the start, refilled at one per 5 s while the burst ran.
    assert 12 <= statuses[200] <= 12 + int(took / 5)
    assert statuses[429] == 18 - statuses[200]
    for answer in answers:
        if answer.status_code == 429:
            assert int(answer.headers["retry-after"]) >= 1
            assert answer.json()["error"]["code"] == "rate_limit_exceeded"
        else:
            assert answer.headers["x-polythink-applied-effort"] == "high"
    assert len(_spread(stack, "globex")) >= 2

    async def spend() -> list[httpx.Response]:
        spent = []
        for i in range(60):
            answer = await _chat(stack, "acme", prompt=f"spend {i}")
            spent.append(answer)
            if answer.status_code != 200:
                break
        return spent

    spent = anyio.run(spend)
    refusal = spent[-1]
    assert refusal.status_code == 429, refusal.text
    assert refusal.headers["x-should-retry"] == "false"
    assert int(refusal.headers["retry-after"]) >= 1
    assert refusal.json()["error"]["code"] == "rate_limit_exceeded"
    assert "acme" in refusal.json()["error"]["message"]
    applied = [a.headers["x-polythink-applied-effort"] for a in spent[:-1]]
    assert applied[0] == "high"
    assert {"medium", "low"} <= set(applied), applied  # stepped down before it ran out
    assert sum(float(a.headers["x-polythink-cost-usd"]) for a in spent[:-1]) <= 0.08
    assert len(_spread(stack, "acme")) >= 2
    # globex is not stepped down by acme's spending, and acme's calls were not globex's.
    later = anyio.run(_chat, stack, "globex")
    assert later.status_code in (200, 429)
    if later.status_code == 200:
        assert later.headers["x-polythink-applied-effort"] == "high"


def test_the_dashboards_gateway_row_shows_the_calls(stack: Stack) -> None:
    # Every worker's series exist before the window (increase() cannot count a series'
    # first sample): hits from the cache for initech, and refused keys.
    deadline = time.monotonic() + 120
    while (
        len(
            _workers(
                stack,
                polythink_tenant="initech",
                polythink_route="fast",
                http_response_status_code="200",
            )
        )
        < 4
        or len(_workers(stack, polythink_tenant="-", http_response_status_code="401")) < 4
    ):
        assert time.monotonic() < deadline, "four workers did not each serve both in 120 s"
        anyio.run(_several, stack)
    prometheus = stack.prometheus
    prometheus.wait_scrapes_after(time.time(), count=1)
    start = prometheus.last_scrape()
    low = functools.partial(_chat, stack, "initech", effort="low")
    answers = [anyio.run(low) for _ in range(2)]
    refused = [anyio.run(_chat, stack, None) for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200]
    assert [a.status_code for a in refused] == [401, 401, 401]
    prometheus.wait_scrapes_after(time.time(), count=1)
    window = Window(start, prometheus.last_scrape())
    panels = [p for p in _panels() if p["title"].startswith(GATEWAY_ROW)]
    assert len(panels) == 3
    for panel in panels:
        title = panel["title"]
        results = [
            prometheus.query(_expr(panel, window, t["refId"]), at=window.end)
            for t in panel["targets"]
        ]
        if title == "Gateway requests by route and tenant":
            got = _by(results[0], "polythink_route", "polythink_tenant")
            assert got[("fast", "initech")] == pytest.approx(2.0)
            assert got[("-", "-")] == pytest.approx(3.0)
        elif title == "Gateway errors by status, route and tenant":
            got = _by(
                results[0], "http_response_status_code", "polythink_route", "polythink_tenant"
            )
            assert got[("401", "-", "-")] == pytest.approx(3.0)
            assert ("200", "fast", "globex") not in got
        elif title == "Gateway added time p50 / p99 by route and tenant":
            p50 = _by(results[0], "polythink_route", "polythink_tenant")[("fast", "initech")]
            p99 = _by(results[1], "polythink_route", "polythink_tenant")[("fast", "initech")]
            slowest = max(float(a.headers["x-polythink-gateway-ms"]) for a in answers) / 1000
            assert 0 < p50 <= p99 <= max(slowest * 2, 0.01)
        else:
            raise AssertionError(f"panel {title!r} has no check here")


async def _several(stack: Stack) -> None:
    """Eight cached initech calls and eight refused ones at once: busy workers leave the
    next connections to the others."""
    async with anyio.create_task_group() as group:
        for _ in range(8):
            group.start_soon(functools.partial(_chat, stack, "initech", effort="low"))
            group.start_soon(_chat, stack, None)


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found |= {int(child) for child in text}
    return found


def test_a_killed_worker_is_replaced_and_the_port_keeps_answering(stack: Stack) -> None:
    workers = _children(stack.master)
    assert len(workers) == 4
    victim = min(workers)
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 90
    while True:
        now = _children(stack.master)
        if len(now) == 4 and victim not in now:
            break
        assert time.monotonic() < deadline, f"no replacement in 90 s: {now}"
        time.sleep(0.2)
    for _ in range(6):
        answer = httpx.get(f"{stack.gateway}/health/ready", timeout=30)
        assert answer.status_code == 200, answer.text
        assert all(check["ok"] for check in answer.json()["checks"].values())


def test_the_stack_runs_the_images_command(stack: Stack) -> None:
    command = Path(f"/proc/{stack.master}/cmdline").read_bytes().split(b"\0")
    words = [w.decode() for w in command if w]
    # .venv/bin/python .venv/bin/polythink serve --workers 4: the image's CMD after the
    # console script (tests/test_deploy.py holds the Dockerfile to it).
    assert Path(words[1]).name == "polythink"
    assert words[2:] == list(image_command()[1:])
