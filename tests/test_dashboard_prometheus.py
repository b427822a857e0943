"""Every panel of dashboards/polythink.json, run against a real Prometheus server.

Calls go through polythink to the simulator with the OpenTelemetry Prometheus exporter
serving ``/metrics``; Debian's ``/usr/bin/prometheus`` (started here on a free loopback port,
temporary config with a 1 s scrape interval and a temporary data directory) scrapes it. Then
each panel's PromQL goes through Prometheus's HTTP API and must give what the simulator's
answers imply. The totals panels are increases over Grafana's ``$__range`` (a counter's raw
value ignores the time picker and falls back to zero when a process restarts), and the rate
panels rates over ``$__rate_interval``; here both are the window between two scrapes,
evaluated at the second, so Prometheus extrapolates nothing and each panel must show exactly
what the calls of that window did.

The same calls run twice: once before the first scrape, so that every series a panel reads
exists (``increase`` cannot count a series' first value: Prometheus 2.42 has no created
timestamps), and once inside the window, which is what is checked. Each run calls in two
phases (the second answered once from the cache the first filled) and spends a small budget
at ``high`` until it steps the reasoning tier down, then moves the calls to flex, then refuses.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import yaml

from polythink import Budget, Client, Response, Source
from polythink.backends.local import LocalBudgets
from polythink.dashboard import MetricsEndpoint
from polythink.errors import BudgetExceededError, PolythinkError
from polythink.middleware import semconv
from polythink.simulator import Simulator
from tests.prerequisites import missing

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "dashboards" / "polythink.json"
CONFIG = ROOT / "dashboards" / "prometheus.yml"
PROMETHEUS = "/usr/bin/prometheus"
GATEWAY_ROW = "Gateway "
"""How the titles of the gateway's panels start."""

# (provider, model, tier, mode): phase 1 touches every tier; phase 2 repeats two of them
# (one as a stream) and asks the first prompt again, which the cache answers.
PHASE_1 = [
    ("openai", "gpt-5.5", "high", "complete"),
    ("openai", "gpt-5.5", "low", "stream"),
    ("openai", "gpt-5.1", "minimal", "complete"),
    ("anthropic", "claude-haiku-5-5", "medium", "stream"),
    ("glm", "glm-5.3", "none", "complete"),
]
PHASE_2 = [
    ("openai", "gpt-5.5", "high", "stream"),
    ("openai", "gpt-5.1", "minimal", "complete"),
    ("glm", "glm-5.3", "none", "complete"),
]
PROMPT = [{"role": "user", "content": "Why is the sky blue? Answer in one sentence."}]
BUDGET = Budget(0.05, step_down_at=0.4, flex_at=0.7, name="dashboard")


BUSY_SECONDS = 180
"""How long a wait on Prometheus may take before the test fails: far past what a quiet machine
needs (about a second), for a CI runner shared with other work."""


def start_prometheus(binary: str, argv: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    """Start Prometheus with ``argv`` on a free port and wait until it is ready; yield the
    process and its base URL. A port another process took between its choice and
    Prometheus's bind makes Prometheus exit at once: it is started again on another port.

    Raises:
        AssertionError: not ready within :data:`BUSY_SECONDS`, or three ports taken.
    """
    deadline = time.time() + BUSY_SECONDS
    for _ in range(3):
        port = _free_port()
        process = subprocess.Popen(
            [binary, *argv, f"--web.listen-address=127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        base = f"http://127.0.0.1:{port}"
        while process.poll() is None:
            try:
                if httpx.get(f"{base}/-/ready", timeout=1).status_code == 200:
                    return process, base
            except httpx.HTTPError:
                pass
            if time.time() > deadline:
                process.terminate()
                process.wait(10)
                raise AssertionError(f"Prometheus did not become ready in {BUSY_SECONDS} s")
            time.sleep(0.1)
    raise AssertionError("Prometheus exited at once three times (its port taken each time?)")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def require_prometheus(path: str) -> str:
    """``path`` when it is an executable; else skip, or fail (see :func:`missing`)."""
    if not os.access(path, os.X_OK):
        missing(f"{path} is not installed (Debian package prometheus; .ci/run installs it)")
    return path


class Run:
    """What the calls returned, and what the panels should therefore show."""

    def __init__(self) -> None:
        self.responses: list[Response] = []
        self.errors: Counter[str] = Counter()
        self.calls: Counter[tuple[str, str]] = Counter()
        self.served: Counter[str] = Counter()
        self.slowest = 0.0
        self.budget_spent = 0.0
        self.stepped: Counter[tuple[str, str, str]] = Counter()
        self.moved: Counter[tuple[str, str]] = Counter()


async def _call(
    client: Client, tier: str, mode: str, run: Run, phase: int, cache: bool = True
) -> None:
    started = time.perf_counter()
    try:
        if mode == "stream":
            response = None
            async for event in client.stream(PROMPT, reasoning_effort=tier, cache=cache):
                if event.type == "done":
                    response = event.response
            assert response is not None
        else:
            response = await client.complete(PROMPT, reasoning_effort=tier, cache=cache)
    except PolythinkError as exc:
        run.errors[f"{type(exc).__module__}.{type(exc).__qualname__}"] += 1
        run.calls[(tier, "unset")] += 1
        return
    finally:
        run.slowest = max(run.slowest, time.perf_counter() - started)
    run.responses.append(response)
    applied = response.applied_effort.value if response.applied_effort else "unset"
    run.calls[(tier, applied)] += 1
    run.served[str(response.source_index)] += 1


async def _spend_the_budget(client: Client, run: Run) -> None:
    """Call at high until the budget refuses: a run of high, then cheaper tiers."""
    for _ in range(200):
        started = time.perf_counter()
        try:
            response = await client.complete(PROMPT, reasoning_effort="high", max_tokens=400)
        except BudgetExceededError as exc:
            run.errors[f"{type(exc).__module__}.{type(exc).__qualname__}"] += 1
            run.calls[("high", "unset")] += 1
            return
        finally:
            run.slowest = max(run.slowest, time.perf_counter() - started)
        run.responses.append(response)
        applied = _tier(response)
        run.calls[("high", applied)] += 1
        run.served[str(response.source_index)] += 1
        assert response.cost is not None
        run.budget_spent += response.cost.total
        if response.step_down is not None:
            run.stepped[("high", applied, response.step_down.budget)] += 1
            if response.step_down.service_tier is not None:
                assert response.service_tier == "flex"
                run.moved[(response.step_down.budget, applied)] += 1
    raise AssertionError("the budget never refused")


async def _phase(
    sim: Simulator, endpoint: MetricsEndpoint, cache: Path, calls: Any, run: Run, phase: int
) -> None:
    async with httpx.AsyncClient() as http:
        if phase == 1:
            source = Source("openai", "gpt-5.5", api_key="sim", base_url=sim.base_url("openai"))
            async with Client(
                [source], http_client=http, meter_provider=endpoint.meter_provider, budgets=[BUDGET]
            ) as client:
                await _spend_the_budget(client, run)
        for provider, model, tier, mode in calls:
            # "error": glm-5.3 cannot switch reasoning off, so "none" is refused before sending
            # and the error panels have something to show.
            source = Source(
                provider,
                model,
                api_key="sim",
                base_url=sim.base_url(provider),
                effort_fallback="error" if provider == "glm" else "nearest",
            )
            async with Client(
                [source], http_client=http, meter_provider=endpoint.meter_provider, cache=cache
            ) as client:
                # Phase 1 fills the cache; phase 2's first call bypasses it (so it spends).
                await _call(client, tier, mode, run, phase, cache=phase == 1 or mode != "stream")
        # One call served by the second source: the first one refuses connections.
        dead = Source(
            "openai", "gpt-5.5", api_key="sim", base_url=f"http://127.0.0.1:{_free_port()}/v1"
        )
        live = Source(
            "anthropic", "claude-haiku-5-5", api_key="sim", base_url=sim.base_url("anthropic")
        )
        async with Client(
            [dead, live], http_client=http, meter_provider=endpoint.meter_provider
        ) as client:
            await _call(client, "high", "complete", run, phase)


class Prometheus:
    def __init__(self, base: str) -> None:
        self.base = base

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        answer = httpx.get(f"{self.base}/api/v1/query", params=params, timeout=10)
        answer.raise_for_status()
        body = answer.json()
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def last_scrape(self) -> float:
        result = self.query('timestamp(up{job="polythink"})')
        return float(result[0]["value"][1]) if result else 0.0

    def wait_scrapes_after(self, moment: float, count: int = 2) -> None:
        """Wait until ``count`` scrapes started after ``moment`` (epoch seconds); on a busy
        machine a 1 s scrape interval may stretch to many seconds."""
        deadline = time.time() + BUSY_SECONDS
        while time.time() < deadline:
            if self.last_scrape() >= moment + (count - 1):
                return
            time.sleep(0.2)
        raise AssertionError(f"Prometheus did not scrape the exporter in {BUSY_SECONDS} s")


class Window:
    """Two scrapes' timestamps (epoch seconds): the checked calls ran between them."""

    def __init__(self, start: float, end: float) -> None:
        self.start = start
        self.end = end

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def millis(self) -> int:
        """The window in whole milliseconds, as scrapes are stamped."""
        return round(self.seconds * 1000)

    @property
    def promql(self) -> str:
        """The window as a PromQL duration, in whole milliseconds as scrapes are stamped."""
        return f"{self.millis}ms"


@pytest.fixture(scope="module")
def scraped(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Prometheus, Run, Window]]:
    binary = require_prometheus(PROMETHEUS)
    tmp = tmp_path_factory.mktemp("prometheus")
    warm_up = Run()
    run = Run()
    with Simulator() as sim:
        endpoint = MetricsEndpoint(0)
        # The shipped config (the telemetry guide's), pointed at this test's exporter.
        shipped = yaml.safe_load(CONFIG.read_text())
        (job,) = shipped["scrape_configs"]
        assert (job["job_name"], shipped["global"]["scrape_interval"]) == ("polythink", "1s")
        job["static_configs"] = [{"targets": [f"127.0.0.1:{endpoint.port}"]}]
        config = tmp / "prometheus.yml"
        config.write_text(yaml.safe_dump(shipped))
        process, base = start_prometheus(
            binary, [f"--config.file={config}", f"--storage.tsdb.path={tmp / 'data'}"]
        )
        patch = pytest.MonkeyPatch()
        try:
            # The budget starts unspent, whatever this process spent before.
            patch.setattr("polythink.client.process_budgets", LocalBudgets)
            prometheus = Prometheus(base)
            anyio.run(_phase, sim, endpoint, tmp / "warm-up", PHASE_1, warm_up, 1)
            anyio.run(_phase, sim, endpoint, tmp / "warm-up", PHASE_2, warm_up, 2)
            prometheus.wait_scrapes_after(time.time(), count=1)
            start = prometheus.last_scrape()
            # A cache of its own, so the checked run fills it and hits it as the first did.
            anyio.run(_phase, sim, endpoint, tmp / "cache", PHASE_1, run, 1)
            anyio.run(_phase, sim, endpoint, tmp / "cache", PHASE_2, run, 2)
            prometheus.wait_scrapes_after(time.time(), count=1)
            yield prometheus, run, Window(start, prometheus.last_scrape())
        finally:
            patch.undo()
            process.terminate()
            process.wait(10)
            endpoint.close()
            shutil.rmtree(tmp, ignore_errors=True)


def _panels() -> list[dict[str, Any]]:
    panels: list[dict[str, Any]] = json.loads(DASHBOARD.read_text())["panels"]
    return panels


def _expr(panel: dict[str, Any], window: Window, ref: str = "A") -> str:
    """The panel's query with Grafana's range variables set to ``window`` (Prometheus 2.x
    range selectors include both ends, so its first scrape is in)."""
    (target,) = [t for t in panel["targets"] if t["refId"] == ref]
    expr = str(target["expr"])
    return expr.replace("$__rate_interval", window.promql).replace("$__range", window.promql)


def _by(result: list[dict[str, Any]], *labels: str) -> dict[Any, float]:
    out = {}
    for series in result:
        key = tuple(series["metric"].get(label, "") for label in labels)
        out[key[0] if len(key) == 1 else key] = float(series["value"][1])
    return out


def _spent(run: Run) -> list[Response]:
    return [r for r in run.responses if not r.cache_hit]


def _tier(response: Response) -> str:
    return response.applied_effort.value if response.applied_effort else "unset"


def test_prometheus_missing_fails_under_the_no_skip_variable_and_skips_elsewhere(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    absent = str(tmp_path / "prometheus")
    monkeypatch.setenv("POLYTHINK_TESTS_NO_SKIP", "1")
    with pytest.raises(pytest.fail.Exception, match="so this fails instead of skipping"):
        require_prometheus(absent)
    monkeypatch.delenv("POLYTHINK_TESTS_NO_SKIP")
    # A CI's own CI=true (GitHub Actions, GitLab) does not turn the skip into a failure.
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.skip.Exception, match="is not installed"):
        require_prometheus(absent)


def _uids(node: Any) -> list[Any]:
    """Every value of a ``uid`` key anywhere in ``node``."""
    if isinstance(node, dict):
        own = [node["uid"]] if "uid" in node else []
        return own + [u for value in node.values() for u in _uids(value)]
    if isinstance(node, list):
        return [u for value in node for u in _uids(value)]
    return []


def test_dashboard_follows_grafanas_classic_json_model() -> None:
    # Fields of Grafana's classic dashboard JSON model
    # (https://grafana.com/docs/grafana/latest/visualizations/dashboards/build-dashboards/
    # view-dashboard-json-model/, read 2026-12-01): an unsaved dashboard has "id": null and
    # Grafana assigns its uid on import; panels sit on a 24-column grid.
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["id"] is None
    assert isinstance(dashboard["schemaVersion"], int)
    assert dashboard["schemaVersion"] >= 36  # datasource references as {type, uid}
    assert isinstance(dashboard["title"], str)
    assert dashboard["title"]
    assert set(dashboard["time"]) == {"from", "to"}
    assert dashboard["annotations"] == {"list": []}
    # The only uid anywhere is the datasource variable's template.
    assert set(_uids(dashboard)) == {"${datasource}"}
    taken: set[tuple[int, int]] = set()
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert all(isinstance(grid[k], int) for k in ("x", "y", "w", "h")), panel["title"]
        assert grid["w"] > 0
        assert grid["h"] > 0
        assert grid["x"] >= 0
        assert grid["y"] >= 0
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        cells = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & taken, f"{panel['title']} overlaps another panel"
        taken |= cells
        assert panel["title"]
        assert panel["targets"]
        for target in panel["targets"]:
            assert target["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert isinstance(target["refId"], str)
            assert target["refId"]
            assert isinstance(target["expr"], str)
            assert target["expr"].strip()
        if panel["type"] == "table":
            # One row per series: an instant query in table format, without the time column.
            for target in panel["targets"]:
                assert (target["instant"], target["range"], target["format"]) == (
                    True,
                    False,
                    "table",
                )
            assert {"id": "organize", "options": {"excludeByName": {"Time": True}}} in panel[
                "transformations"
            ]


def test_dashboard_uses_a_datasource_variable_and_no_uids() -> None:
    text = DASHBOARD.read_text()
    dashboard = json.loads(text)
    assert "uid" not in dashboard
    (variable,) = dashboard["templating"]["list"]
    assert (variable["name"], variable["type"], variable["query"]) == (
        "datasource",
        "datasource",
        "prometheus",
    )
    # Grafana's import dialog offers a data source for each of __inputs and puts the chosen
    # one where ${DS_PROMETHEUS} stands: here the variable's default, which every panel reads.
    assert dashboard["__inputs"] == [
        {
            "name": "DS_PROMETHEUS",
            "label": "Prometheus",
            "description": "The Prometheus that scrapes polythink's /metrics",
            "type": "datasource",
            "pluginId": "prometheus",
            "pluginName": "Prometheus",
        }
    ]
    assert {"type": "datasource", "id": "prometheus"}.items() <= dashboard["__requires"][0].items()
    assert variable["current"]["value"] == "${DS_PROMETHEUS}"
    assert text.count("${DS_PROMETHEUS}") == 1
    for panel in dashboard["panels"]:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"])
        assert panel["type"] in {"timeseries", "stat", "bargauge", "table"}
        assert set(panel["gridPos"]) == {"x", "y", "w", "h"}
        refs = [t["refId"] for t in panel["targets"]]
        assert refs == sorted(set(refs))
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert ids == list(range(1, len(ids) + 1))
    # Every metric a panel reads is a semconv instrument as the exporter spells it: dots as
    # underscores, a unit suffix for s and USD (none for {token} or {call}), _total after
    # a counter, _bucket / _sum / _count after a histogram.
    suffix = {semconv.UNIT_SECONDS: "_seconds", semconv.UNIT_USD: "_USD"}
    written = set()
    for name, unit, kind in (
        (semconv.POLYTHINK_REASONING_TOKENS, semconv.UNIT_TOKEN, "histogram"),
        (semconv.GEN_AI_CLIENT_OPERATION_DURATION, semconv.UNIT_SECONDS, "histogram"),
        (semconv.GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK, semconv.UNIT_SECONDS, "histogram"),
        (semconv.GEN_AI_CLIENT_TOKEN_USAGE, semconv.UNIT_TOKEN, "histogram"),
        (semconv.POLYTHINK_CLIENT_CALLS, semconv.UNIT_CALL, "counter"),
        (semconv.POLYTHINK_CLIENT_COST, semconv.UNIT_USD, "counter"),
        (semconv.POLYTHINK_CLIENT_COST_SAVED, semconv.UNIT_USD, "counter"),
        (semconv.POLYTHINK_BUDGET_SPEND, semconv.UNIT_USD, "counter"),
        (semconv.POLYTHINK_BUDGET_STEP_DOWNS, semconv.UNIT_CALL, "counter"),
        (semconv.POLYTHINK_BUDGET_REMAINING, semconv.UNIT_USD, "gauge"),
        (semconv.HTTP_SERVER_REQUEST_DURATION, semconv.UNIT_SECONDS, "histogram"),
        (semconv.POLYTHINK_GATEWAY_DURATION, semconv.UNIT_SECONDS, "histogram"),
    ):
        base = name.replace(".", "_") + suffix.get(unit, "")
        ends = {"counter": ("_total",), "gauge": ("",)}.get(kind, ("_bucket", "_sum", "_count"))
        written |= {base + end for end in ends}
    read = set(
        re.findall(r"\b((?:gen_ai|polythink|http)_\w+?_(?:total|sum|bucket|count|USD))\b", text)
    )
    assert read
    assert read <= written


def test_no_panel_shows_a_raw_counter() -> None:
    # A counter's raw value is what one process counted since it started: it ignores the
    # time picker and drops when the process restarts. Every counter and histogram series a
    # panel reads goes through increase() or rate() over a Grafana range variable.
    cumulative = re.compile(r"\b(?:gen_ai|polythink|http)_\w+?_(?:total|sum|bucket|count)\b")
    windowed = re.compile(
        r"\b(?:increase|rate)\(((?:gen_ai|polythink|http)_\w+)(?:\{[^}]*\})?"
        r"\[\$__(?:range|rate_interval)\]\)"
    )
    for panel in _panels():
        for target in panel["targets"]:
            expr = target["expr"]
            assert sorted(cumulative.findall(expr)) == sorted(windowed.findall(expr)), panel[
                "title"
            ]


def test_prometheus_every_panel_shows_what_the_calls_imply(
    scraped: tuple[Prometheus, Run, Window],
) -> None:
    prometheus, run, window = scraped
    spent = _spent(run)
    hits = [r for r in run.responses if r.cache_hit]
    assert hits, "the second phase should have been answered from the cache once"
    assert run.errors, "glm-5.3 refuses 'none', so some calls fail"
    assert run.errors["polythink.errors.BudgetExceededError"] == 1
    tokens: defaultdict[str, float] = defaultdict(float)
    dollars: defaultdict[str, float] = defaultdict(float)
    per_model: defaultdict[tuple[str, str], float] = defaultdict(float)
    usage: defaultdict[str, float] = defaultdict(float)
    per_service_tier: defaultdict[str, float] = defaultdict(float)
    for response in spent:
        assert response.usage is not None
        assert response.usage.reasoning_tokens is not None
        assert response.cost is not None
        tokens[_tier(response)] += response.usage.reasoning_tokens
        dollars[_tier(response)] += response.cost.total
        per_model[(response.provider, response.model)] += response.cost.total
        per_service_tier[response.service_tier or "unset"] += response.cost.total
        usage["input"] += response.usage.input_tokens or 0
        usage["output"] += response.usage.output_tokens or 0
    total_calls = sum(run.calls.values())
    checked = set()
    for panel in _panels():
        title = panel["title"]
        if title.startswith(GATEWAY_ROW):
            continue  # polythink serve's row: tests/test_serve_fleet.py runs it on a gateway
        results = [
            prometheus.query(_expr(panel, window, t["refId"]), at=window.end)
            for t in panel["targets"]
        ]
        assert all(results), f"panel {title!r}: a query returned no series"
        result = results[0]
        checked.add(title)
        if title == "Reasoning tokens per applied tier (total)":
            assert _by(result, "polythink_reasoning_applied_effort") == dict(tokens)
        elif title == "Reasoning tokens per applied tier (rate)":
            rates = _by(result, "polythink_reasoning_applied_effort")
            # The rate is over the range the query names, in whole milliseconds; the
            # scrape timestamps' own difference carries float64 noise at 1.8e9 s (~1e-7 s).
            per_window = {tier: rate * window.millis / 1000 for tier, rate in rates.items()}
            assert per_window == pytest.approx(dict(tokens), rel=1e-9)
        elif title == "Requested → applied tier (calls)":
            got = _by(
                result, "polythink_reasoning_requested_effort", "polythink_reasoning_applied_effort"
            )
            assert got == {key: float(n) for key, n in run.calls.items()}
            assert got[("minimal", "low")] == 2  # gpt-5.1 has no minimal: nearest is low
        elif title == "Cost per applied tier (USD)":
            got = _by(result, "polythink_reasoning_applied_effort")
            assert got == pytest.approx(dict(dollars), rel=1e-12)
        elif title == "Cost per model (USD)":
            got = _by(result, "gen_ai_provider_name", "gen_ai_response_model")
            assert got == pytest.approx(dict(per_model), rel=1e-12)
        elif title == "Cache hit ratio":
            assert _by(result, "") == {"": len(hits) / total_calls}
        elif title == "Money saved by the cache (USD)":
            saved = sum(r.cost.total for r in hits if r.cost is not None)
            assert _by(result, "") == pytest.approx({"": saved}, rel=1e-12)
        elif title in ("Call latency p50 / p95 / p99", "Time to first chunk p50 / p95 / p99"):
            p50, p95, p99 = (float(r[0]["value"][1]) for r in results)
            assert 0 < p50 <= p95 <= p99 <= 2 * run.slowest + 0.01, (p50, p95, p99)
        elif title == "Token usage by type":
            assert _by(result, "gen_ai_token_type") == dict(usage)
        elif title == "Errors by error.type":
            assert _by(result, "error_type") == {k: float(n) for k, n in run.errors.items()}
        elif title == "Calls served per source (after failover)":
            got: defaultdict[str, float] = defaultdict(float)
            for series in result:
                got[series["metric"]["polythink_source_index"]] += float(series["value"][1])
            assert got == {index: float(n) for index, n in run.served.items()}
            assert got["1"] == 2  # the failover call, once per phase
        elif title == "Budget spend per interval (USD)":
            assert _by(result, "polythink_budget_name") == pytest.approx(
                {"dashboard": run.budget_spent}, rel=1e-6
            )
        elif title == "Budget remaining (USD)":
            got = _by(result, "polythink_budget_name", "polythink_budget_scope")
            left = BUDGET.usd - run.budget_spent
            assert got == pytest.approx({("dashboard", "all"): left}, rel=1e-6)
        elif title == "Calls stepped down by a budget (requested → applied)":
            got = _by(
                result,
                "polythink_reasoning_requested_effort",
                "polythink_reasoning_applied_effort",
                "polythink_budget_name",
            )
            assert got == {key: float(n) for key, n in run.stepped.items()}
            # gpt-5.5 from high: medium, then low, then none, as the budget runs low.
            assert {key[1] for key in got} >= {"medium", "low", "none"}
        elif title == "Calls moved to flex by a budget":
            got = _by(result, "polythink_budget_name", "polythink_reasoning_applied_effort")
            assert got == {key: float(n) for key, n in run.moved.items()}
            assert got[("dashboard", "none")] >= 1  # flex after the last reasoning step
        elif title == "Cost per service tier (USD)":
            got = _by(result, "polythink_service_tier_served")
            assert got == pytest.approx(dict(per_service_tier), rel=1e-12)
            assert set(got) == {"unset", "flex"}
        elif title == "Calls refused by a budget":
            assert _by(result, "") == {"": 1.0}
        else:
            raise AssertionError(f"panel {title!r} has no check here")
    assert len(checked) == len([p for p in _panels() if not p["title"].startswith(GATEWAY_ROW)])
