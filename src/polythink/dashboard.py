"""From the process to the graph: a Prometheus ``/metrics`` endpoint, a steady stream of demo
calls to watch on it, and a PNG chart of reasoning tokens and cost per applied tier.

Used by ``polythink demo --metrics-port N [--serve] [--chart PATH]``; an application can use
:class:`MetricsEndpoint` the same way (``Client(meter_provider=endpoint.meter_provider)``).
The metric names the endpoint writes are those of :mod:`polythink.middleware.semconv` as the
OpenTelemetry Prometheus exporter spells them (``polythink_client_cost_USD_total`` …), which
``dashboards/polythink.json`` charts.

Needs the ``otel`` extra (``opentelemetry-sdk``, ``opentelemetry-exporter-prometheus``) for
the endpoint and ``matplotlib`` for the chart; both are imported when first used.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx

from polythink.client import Client
from polythink.config import Source
from polythink.errors import PolythinkError
from polythink.types import EFFORT_ORDER, Effort, Response

__all__ = ["SERVE_MODELS", "MetricsEndpoint", "chart_totals", "serve_calls", "write_chart"]

SERVE_MODELS: tuple[tuple[str, str], ...] = (
    ("openai", "gpt-6-luna"),
    ("anthropic", "claude-opus-5-5"),
    ("gemini", "gemini-3.8-flash"),
    ("deepseek", "deepseek-v4-pro"),
)
"""(provider, model) pairs the ``--serve`` loop calls, each with every tier."""

_PROMPTS = (
    "Why is the sky blue? Answer in one sentence.",
    "Name a prime number larger than 100.",
    "What is the capital of Portugal?",
)


class MetricsEndpoint:
    """An OpenTelemetry meter provider whose metrics are served at ``/metrics``.

    Args:
        port: TCP port on ``host`` (0 = a free port; read :attr:`port` after).
        host: the address to bind (default loopback only).

    Raises:
        ImportError: the ``otel`` extra is not installed (the message names it).
        OSError: the port cannot be bound.
    """

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        try:
            from opentelemetry.exporter.prometheus import PrometheusMetricReader
            from opentelemetry.sdk.metrics import MeterProvider
            from prometheus_client import CollectorRegistry, start_http_server
        except ImportError as exc:
            raise ImportError(
                "serving /metrics needs opentelemetry-sdk and opentelemetry-exporter-prometheus: "
                "pip install 'polythink[otel]'"
            ) from exc
        # A registry of its own: two endpoints in one process never collide.
        self.registry = CollectorRegistry()
        self.meter_provider: Any = MeterProvider(
            metric_readers=[PrometheusMetricReader(registry=self.registry)]
        )
        self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        self.host = host
        self.port: int = self._server.server_address[1]

    @property
    def url(self) -> str:
        """The scrape URL (``http://host:port/metrics``)."""
        return f"http://{self.host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving and shut the meter provider down."""
        self._server.shutdown()
        self._server.server_close()
        self.meter_provider.shutdown()


async def serve_calls(
    root: str,
    *,
    meter_provider: Any,
    cache: Any,
    interval: float = 0.5,
    calls: int | None = None,
    seed: int = 0,
) -> int:
    """Make a slow, mixed stream of calls against the simulator at ``root`` until cancelled.

    Every (provider, model) of :data:`SERVE_MODELS`, every tier, streamed and not; prompts
    repeat, so some answers come from ``cache``. A call the simulator faults (see
    ``Settings.faults``) or a tier a model refuses ends in an error, recorded like any other.

    Args:
        root: the simulator's URL root (``http://127.0.0.1:PORT``).
        meter_provider: where the metrics go.
        cache: the clients' cache (a directory or a store; see :class:`~polythink.Client`).
        interval: seconds between two calls.
        calls: stop after this many calls (``None``: run until cancelled).
        seed: seed of the draw of model, tier, prompt and mode.

    Returns:
        The number of calls made.
    """
    draw = random.Random(seed)
    tiers = [*EFFORT_ORDER, Effort.AUTO]
    made = 0
    async with httpx.AsyncClient(timeout=30.0) as http:
        clients = [
            Client(
                [Source(p, m, api_key="sim", base_url=f"{root}/{p}/v1", max_retries=0)],
                http_client=http,
                meter_provider=meter_provider,
                cache=cache,
            )
            for p, m in SERVE_MODELS
        ]
        for client in clients:
            client.start()
        try:
            while calls is None or made < calls:
                client = draw.choice(clients)
                tier = draw.choice(tiers)
                prompt = [{"role": "user", "content": draw.choice(_PROMPTS)}]
                try:
                    if draw.random() < 0.5:
                        async for _ in client.stream(prompt, reasoning_effort=tier):
                            pass
                    else:
                        await client.complete(prompt, reasoning_effort=tier)
                except PolythinkError:
                    pass
                made += 1
                await anyio.sleep(interval)
        finally:
            for client in clients:
                await client.aclose()
    return made


def chart_totals(
    responses: Iterable[Response],
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """What :func:`write_chart` draws: ``(tokens, dollars)``, each ``{model: {tier: sum}}``.

    ``tokens`` sums the reasoning tokens and ``dollars`` the cost (USD) of ``responses``
    per model and applied tier (the tier's value; ``"unset"`` when none was applied).
    Cache hits are left out: they spent nothing (the spend is that of the call that filled
    the cache). A response without usage adds no tokens, one without a cost no dollars; a
    model or tier with nothing to add does not appear.
    """
    tokens: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    dollars: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for response in responses:
        if response.cache_hit:
            continue
        tier = response.applied_effort.value if response.applied_effort else "unset"
        if response.usage is not None and response.usage.reasoning_tokens is not None:
            tokens[response.model][tier] += response.usage.reasoning_tokens
        if response.cost is not None:
            dollars[response.model][tier] += response.cost.total
    return (
        {model: dict(per) for model, per in tokens.items()},
        {model: dict(per) for model, per in dollars.items()},
    )


def write_chart(path: str | Path, responses: Iterable[Response]) -> Path:
    """Write a PNG: reasoning tokens and cost (USD) per applied tier, one bar per model.

    The bars are :func:`chart_totals` of ``responses`` (cache hits left out: they spent
    nothing); pass every response of a tool loop, not only its last, to chart its spend.

    Returns:
        The path written.

    Raises:
        ImportError: matplotlib is not installed.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tokens, dollars = chart_totals(responses)
    order = [e.value for e in (*EFFORT_ORDER, Effort.AUTO)] + ["unset"]
    used = {t for per in (*tokens.values(), *dollars.values()) for t in per}
    tiers = [t for t in order if t in used]
    models = sorted(set(tokens) | set(dollars))
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    _bars(top, tiers, models, tokens, "reasoning tokens")
    _bars(bottom, tiers, models, dollars, "cost (USD)")
    top.set_title("Reasoning tokens and cost per applied tier")
    bottom.set_xlabel("applied reasoning tier")
    top.legend(fontsize="small", ncol=2)
    figure.tight_layout()
    out = Path(path)
    figure.savefig(out, format="png", dpi=100)
    plt.close(figure)
    return out


def _bars(
    axes: Any,
    tiers: Sequence[str],
    models: Sequence[str],
    values: dict[str, dict[str, float]],
    label: str,
) -> None:
    import matplotlib

    # 20 distinct colours: the demo calls more models than the default cycle's 10.
    palette = matplotlib.colormaps["tab20"]
    width = 0.8 / max(len(models), 1)
    for i, model in enumerate(models):
        xs = [t + i * width for t in range(len(tiers))]
        heights = [values.get(model, {}).get(tier, 0.0) for tier in tiers]
        axes.bar(xs, heights, width, label=model, color=palette(i % 20))
    axes.set_xticks([t + 0.4 - width / 2 for t in range(len(tiers))], tiers)
    axes.set_ylabel(label)
