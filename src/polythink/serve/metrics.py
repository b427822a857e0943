"""The gateway's metrics: its own instruments, served for Prometheus with the calls' ones.

Two histograms per answer, through the OpenTelemetry API:

- ``http.server.request.duration`` (seconds; OpenTelemetry's HTTP server convention), with
  ``http.request.method``, ``http.route`` (the endpoint, such as ``/v1/messages``),
  ``http.response.status_code``, and polythink's ``polythink.route`` (the model id the call
  routed by, ``-`` before one is known) and ``polythink.tenant`` (``-`` without keys): the
  requests, and the errors by status;
- ``polythink.gateway.duration`` (seconds): what the gateway added to a call, its wall time
  less the time spent in the sources' transports (the ``x-polythink-gateway-ms`` header),
  with the same ``http.route``, ``polythink.route`` and ``polythink.tenant``.

The OpenTelemetry Prometheus exporter writes them as ``http_server_request_duration_seconds_*``
and ``polythink_gateway_duration_seconds_*``; every route's client records its calls'
``gen_ai.*`` and ``polythink.*`` metrics on the same meter provider (see
:mod:`polythink.middleware.semconv`), so one scrape has everything ``dashboards/`` charts.

Several workers (:mod:`polythink.serve.fleet`) each keep their own metrics and serve them on
a Unix socket of the fleet's directory; ``/metrics`` on any of them answers for the whole
fleet: every worker's series, each with a ``worker`` label (its slot, ``0`` to ``N-1``; a
worker that replaces a dead one takes its slot and counts from zero, which Prometheus reads
as a counter reset).

Needs the ``otel`` extra (``opentelemetry-sdk``, ``opentelemetry-exporter-prometheus``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from polythink.middleware import semconv

__all__ = [
    "ADDED_BUCKETS",
    "REQUEST_BUCKETS",
    "Exposition",
    "GatewayMetrics",
    "fleet_text",
    "merge_expositions",
    "worker_socket",
]

REQUEST_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
)
"""``http.server.request.duration`` buckets: the HTTP convention's advice, then minutes for
long streams."""

ADDED_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.00075,
    0.001,
    0.0015,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    1.0,
)
"""``polythink.gateway.duration`` buckets: a tenth of a millisecond to a second."""

_NONE = "-"


def _histogram(meter: Any, name: str, description: str, buckets: tuple[float, ...]) -> Any:
    try:
        return meter.create_histogram(
            name, unit="s", description=description, explicit_bucket_boundaries_advisory=buckets
        )
    except TypeError:
        # opentelemetry-api before 1.31 has no bucket advice.
        return meter.create_histogram(name, unit="s", description=description)


class GatewayMetrics:
    """The gateway's two histograms (see the module docstring) on ``meter_provider``."""

    def __init__(self, meter_provider: Any) -> None:
        meter = meter_provider.get_meter("polythink.serve")
        self._requests = _histogram(
            meter,
            semconv.HTTP_SERVER_REQUEST_DURATION,
            "Duration of HTTP server requests (streams to their last byte).",
            REQUEST_BUCKETS,
        )
        self._added = _histogram(
            meter,
            semconv.POLYTHINK_GATEWAY_DURATION,
            "Time a call spent in the gateway: its wall time less the time in the sources' "
            "transports.",
            ADDED_BUCKETS,
        )

    def record(
        self,
        *,
        method: str,
        endpoint: str,
        status: int,
        route: str | None,
        tenant: str | None,
        seconds: float,
        added: float | None,
    ) -> None:
        """Record one answer: its duration, and what the gateway added (``None``: the
        request never became a call)."""
        where = {
            semconv.HTTP_ROUTE: endpoint,
            semconv.POLYTHINK_GATEWAY_ROUTE: route or _NONE,
            semconv.POLYTHINK_GATEWAY_TENANT: tenant or _NONE,
        }
        self._requests.record(
            seconds,
            {
                semconv.HTTP_REQUEST_METHOD: method,
                semconv.HTTP_RESPONSE_STATUS_CODE: status,
                **where,
            },
        )
        if added is not None:
            self._added.record(added, where)


class Exposition:
    """A meter provider whose metrics this process serves in Prometheus's text format.

    Raises:
        ImportError: the ``otel`` extra is not installed (the message names it).
    """

    def __init__(self) -> None:
        try:
            from opentelemetry.exporter.prometheus import PrometheusMetricReader
            from opentelemetry.sdk.metrics import MeterProvider
            from prometheus_client import CollectorRegistry
        except ImportError as exc:
            raise ImportError(
                "the gateway's /metrics needs opentelemetry-sdk and "
                "opentelemetry-exporter-prometheus: pip install 'polythink[otel]' (or set "
                "metrics = false in [serve])"
            ) from exc
        self.registry = CollectorRegistry()
        self.meter_provider: Any = MeterProvider(
            metric_readers=[PrometheusMetricReader(registry=self.registry)]
        )

    def text(self) -> bytes:
        """This process's metrics, in Prometheus's text format."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)

    def shutdown(self) -> None:
        """Shut the meter provider down."""
        self.meter_provider.shutdown()


def worker_socket(directory: str | Path, slot: int) -> Path:
    """The Unix socket a worker serves its own metrics on."""
    return Path(directory) / f"worker-{slot}.sock"


def merge_expositions(texts: Mapping[str, bytes]) -> bytes:
    """One exposition of several workers' (``texts``: worker label → its text): each
    sample gains a ``worker`` label, families of one name are merged.

    Raises:
        ValueError: a text Prometheus's parser refuses.
    """
    from prometheus_client.exposition import generate_latest
    from prometheus_client.parser import text_string_to_metric_families
    from prometheus_client.samples import Sample

    families: dict[str, Any] = {}
    for worker, text in sorted(texts.items()):
        for family in text_string_to_metric_families(text.decode()):
            kept = families.get(family.name)
            if kept is None:
                kept = families[family.name] = family
                samples = list(family.samples)
                kept.samples = []
            else:
                samples = list(family.samples)
            for sample in samples:
                kept.samples.append(
                    Sample(
                        sample.name,
                        {**sample.labels, "worker": worker},
                        sample.value,
                        sample.timestamp,
                        sample.exemplar,
                    )
                )

    class _Merged:
        def collect(self) -> list[Any]:
            return list(families.values())

    return generate_latest(_Merged())


async def fleet_text(directory: str | Path, own_slot: int, own: bytes) -> bytes:
    """The fleet's exposition: this worker's ``own`` text and every other worker's, read
    from its socket in ``directory`` (a worker that does not answer in 2 s is left out)."""
    import aiohttp

    texts = {str(own_slot): own}
    # A directory of a few sockets: listing it does not block for long.
    for path in sorted(Path(directory).glob("worker-*.sock")):  # noqa: ASYNC240
        slot = path.stem.removeprefix("worker-")
        if slot == str(own_slot):
            continue
        try:
            connector = aiohttp.UnixConnector(path=str(path))
            async with (
                aiohttp.ClientSession(
                    connector=connector, timeout=aiohttp.ClientTimeout(total=2)
                ) as session,
                session.get("http://worker/metrics") as answer,
            ):
                if answer.status == 200:
                    texts[slot] = await answer.read()
        except (TimeoutError, aiohttp.ClientError, OSError):
            continue
    return merge_expositions(texts)
