"""Turn a run's results into targets, tables (terminal and Markdown) and PNG charts.

Ratios are always taken within one run, against ``raw-httpx`` on the same wire (for the
``anthropic`` SDK, ``raw-httpx@anthropic``). Units in tables: µs of client CPU, ms of
latency, MiB of memory.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["charts", "markdown", "print_tables", "tables", "targets", "update_readme"]

FLOOR = "raw-httpx"
README_START = "<!-- results:start -->"
README_END = "<!-- results:end -->"

Table = tuple[str, list[str], list[list[str]], list[str]]
"""(title, column headers, rows of cells, notes under the table)."""


def _get(data: dict[str, Any] | None, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def _floor_for(client: str) -> str:
    _, _, wire = client.partition("@")
    return f"{FLOOR}@{wire}" if wire else FLOOR


def _ratio(value: Any, floor: Any) -> float | None:
    if not isinstance(value, int | float) or not isinstance(floor, int | float) or not floor:
        return None
    return float(value) / float(floor)


def _x(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}×"


def _us(seconds: Any) -> str:
    return "-" if seconds is None else f"{seconds * 1e6:,.0f}"


def _ms(seconds: Any) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:,.1f}"


def _mib(kib: Any) -> str:
    return "-" if kib is None else f"{kib / 1024:,.1f}"


def _target(
    text: str,
    ratio: float | None,
    limit: float,
    *,
    below: bool = False,
    missing: str = "",
    unit: str = "×",
) -> dict[str, Any]:
    if ratio is None:
        return {"target": text, "measured": None, "limit": limit, "met": None, "note": missing}
    met = ratio < limit if below else ratio <= limit
    return {"target": text, "measured": ratio, "limit": limit, "met": met, "unit": unit, "note": ""}


def targets(scenarios: dict[str, Any]) -> list[dict[str, Any]]:
    """Every benchmark target with its measured ratio and whether it was met."""
    out: list[dict[str, Any]] = []
    load = _get(scenarios, "load", "clients") or {}
    why_load = "load scenario not run" if "load" not in scenarios else "client not measured"
    for level in ("1", "64"):
        floor = _get(load, FLOOR, level, "cpu_per_request")
        for client, limit, below in (
            ("polythink-full-httpx", 1.25, False),
            ("polythink-full-aiohttp", 1.25, False),
            ("polythink-bare-httpx", 1.10, False),
            ("polythink-bare-aiohttp", 1.10, False),
            ("polythink-full-aiohttp", 1.0, True),
        ):
            cpu = _get(load, client, level, "cpu_per_request")
            relation = "<" if below else "≤"
            out.append(
                _target(
                    f"{client} CPU/request at concurrency {level} {relation} {limit}× raw httpx",
                    _ratio(cpu, floor),
                    limit,
                    below=below,
                    missing=why_load,
                )
            )
    for client in ("polythink-full-httpx", "polythink-full-aiohttp"):
        p50 = _get(load, client, "64", "p50")
        p99 = _get(load, client, "64", "p99")
        out.append(
            _target(
                f"{client} p99 ≤ 3× p50 at concurrency 64", _ratio(p99, p50), 3.0, missing=why_load
            )
        )
    official = _ratio(_get(load, "openai", "64", "p99"), _get(load, "openai", "64", "p50"))
    # On httpx's own pool even raw httpx's p99 is several times its p50 (the pool's cost
    # under 64 calls): the comparison is made on polythink's default layer.
    for client in ("polythink-full-aiohttp",):
        bound = "the openai SDK's" if official is None else f"the openai SDK's ({official:.2f})"
        out.append(
            _target(
                f"{client} p99/p50 at concurrency 64 ≤ {bound} in the same run",
                None
                if official is None
                else _ratio(_get(load, client, "64", "p99"), _get(load, client, "64", "p50")),
                official or 0.0,
                missing=why_load if "load" not in scenarios else "the openai SDK was not measured",
            )
        )
    layers = _get(scenarios, "layers", "clients") or {}
    out.append(
        _target(
            "polythink-client+telemetry+cost CPU/request ≤ 1.10× polythink-client+telemetry",
            _ratio(
                _get(layers, "polythink-client+telemetry+cost", "1", "cpu_per_request"),
                _get(layers, "polythink-client+telemetry", "1", "cpu_per_request"),
            ),
            1.10,
            missing="layers scenario not run" if "layers" not in scenarios else "not measured",
        )
    )
    added = _get(scenarios, "layers", "user_layer", "added_per_call") or {}
    out.append(
        _target(
            "one no-op user layer CPU/call ≤ 2× the built-in Passthrough's (in-process)",
            _ratio(added.get("user-noop"), added.get("passthrough")),
            2.0,
            missing="layers scenario not run" if "layers" not in scenarios else "not measured",
        )
    )
    out.extend(_conversation_targets(scenarios))
    stream = _get(scenarios, "stream", "clients") or {}
    floor = _get(stream, FLOOR, "cpu_per_delta")
    for client in ("polythink-full-httpx", "polythink-full-aiohttp"):
        out.append(
            _target(
                f"{client} streaming CPU/chunk ≤ 1.2× raw SSE floor",
                _ratio(_get(stream, client, "cpu_per_delta"), floor),
                1.2,
                missing="stream scenario not run" if "stream" not in scenarios else "not measured",
            )
        )
    cache = _get(scenarios, "cache") or {}
    hit = next(iter((_get(cache, "clients") or {}).values()), None)
    cache_skipped = list((_get(cache, "skipped") or {}).values())
    out.append(
        _target(
            "cache hit ≤ 0.3× a loopback round trip (p50)",
            _ratio(_get(hit, "hit_p50"), _get(hit, "round_trip_p50")),
            0.3,
            missing=cache_skipped[0] if cache_skipped else "cache scenario not run",
        )
    )
    limits = _get(scenarios, "ratelimit") or {}
    for client in ("polythink-full-httpx", "polythink-full-aiohttp"):
        measured = _get(limits, "clients", client)
        why = (_get(limits, "skipped") or {}).get(client, "rate-limit scenario not run")
        steady = _get(measured, "rpm_steady")
        configured = _get(measured, "rpm_configured")
        error = abs(steady / configured - 1) if steady is not None and configured else None
        out.append(
            _target(
                f"{client} achieved RPM within 3 % of the limit", error, 0.03, missing=why, unit="%"
            )
        )
        in_flight = _get(measured, "max_in_flight")
        cap = _get(measured, "max_concurrency")
        out.append(
            _target(
                f"{client} concurrency cap never exceeded (max in flight / cap)",
                _ratio(in_flight, cap),
                1.0,
                missing=why,
            )
        )
    memory = _get(scenarios, "memory", "clients") or {}
    words = _get(scenarios, "memory", "words") or 100_000
    for client in ("polythink-full-aiohttp", "polythink-full-httpx", "polythink-bare-httpx"):
        growth = _get(memory, client, "rss_growth_kib")
        if growth is None and client == "polythink-bare-httpx":
            continue
        out.append(
            _target(
                f"{client} peak RSS growth over a {words:,}-chunk stream < 20 MiB",
                None if growth is None else growth / 1024,
                20.0,
                below=True,
                missing="memory scenario not run",
                unit="MiB",
            )
        )
    seconds = _get(scenarios, "import", "seconds") or {}
    out.append(
        _target(
            "import polythink ≤ 1.5× import httpx",
            _ratio(seconds.get("polythink"), seconds.get("httpx")),
            1.5,
            missing="import scenario not run",
        )
    )
    return out


def _conversation_targets(scenarios: dict[str, Any]) -> list[dict[str, Any]]:
    """The conversation-size targets: per size, polythink against the raw floors; and the
    agent loop's growth in CPU per turn (last tenth of the turns over the first) against raw
    httpx's, whose growth is the serialisation of the body that every client pays: a cost in
    proportion to the whole conversation would grow faster."""
    out: list[dict[str, Any]] = []
    scenario = _get(scenarios, "conversation") or {}
    clients = _get(scenario, "clients") or {}
    why = "conversation scenario not run" if not scenario else "client not measured"
    sizes = list(_get(clients, FLOOR, "sizes") or {})
    for size in sizes:
        httpx_cpu = _get(clients, FLOOR, "sizes", size, "cpu_per_call")
        aiohttp_cpu = _get(clients, "raw-aiohttp", "sizes", size, "cpu_per_call")
        for client, floor_name, floor, limit in (
            ("polythink-default", "raw httpx", httpx_cpu, 1.0),
            ("polythink-default", "raw aiohttp", aiohttp_cpu, 1.5),
            ("polythink-full-aiohttp", "raw httpx", httpx_cpu, 1.25),
        ):
            cpu = _get(clients, client, "sizes", size, "cpu_per_call")
            out.append(
                _target(
                    f"{client} CPU/call with {size} messages ≤ {limit}× {floor_name}",
                    _ratio(cpu, floor),
                    limit,
                    missing=why,
                )
            )

    agent = _get(clients, FLOOR, "agent") or {}
    grown = ""
    floor_growth = None
    if agent:
        grown = f" ({agent['start'] + 1} to {agent['start'] + 2 * agent['turns'] - 1} messages)"
        floor_growth = _ratio(agent["last_tenth"], agent["first_tenth"])
    for client in ("polythink-default", "polythink-full-aiohttp"):
        measured = _get(clients, client, "agent")
        growth = (
            None if measured is None else _ratio(measured["last_tenth"], measured["first_tenth"])
        )
        out.append(
            _target(
                f"{client} agent-loop CPU per turn grows ≤ 1.1× raw httpx's growth" + grown,
                _ratio(growth, floor_growth),
                1.1,
                missing=why,
            )
        )
    return out


def _measured(target: dict[str, Any]) -> str:
    value = target["measured"]
    if value is None:
        return "-"
    unit = target.get("unit", "×")
    if unit == "%":
        return f"{value * 100:.1f} %"
    if unit == "MiB":
        return f"{value:.1f} MiB"
    return f"{value:.2f}×"


def tables(results: dict[str, Any]) -> list[Table]:
    """The results as tables of strings, one per scenario plus the targets."""
    scenarios = results.get("scenarios", {})
    out: list[Table] = []
    load = scenarios.get("load")
    if load:
        rows = []
        clients = load["clients"]
        for client, data in clients.items():
            floor = clients.get(_floor_for(client), {})
            c1, c64 = data.get("1", {}), data.get("64", {})
            rows.append(
                [
                    client,
                    _us(c1.get("cpu_per_request")),
                    _x(_ratio(c1.get("cpu_per_request"), _get(floor, "1", "cpu_per_request"))),
                    _us(c64.get("cpu_per_request")),
                    _x(_ratio(c64.get("cpu_per_request"), _get(floor, "64", "cpu_per_request"))),
                    f"{c64.get('rps', 0):,.0f}",
                    _ms(c1.get("p50")),
                    _ms(c64.get("p50")),
                    _ms(c64.get("p99")),
                    _x(_ratio(c64.get("p99"), c64.get("p50"))),
                    _mib(data.get("peak_rss_kib")),
                    str(int(c1.get("errors", 0) + c64.get("errors", 0))),
                ]
            )
        out.append(
            (
                "Non-streaming calls (client CPU per request, µs; latency, ms)",
                [
                    "client",
                    "CPU c=1",
                    "× raw",
                    "CPU c=64",
                    "× raw",
                    "req/s c=64",
                    "p50 c=1",
                    "p50 c=64",
                    "p99 c=64",
                    "p99/p50",
                    "peak RSS MiB",
                    "errors",
                ],
                rows,
                _footnotes(load),
            )
        )
    out.extend(_conversation_tables(scenarios.get("conversation")))
    layers = scenarios.get("layers")
    if layers:
        clients = layers["clients"]
        floor = _get(clients, FLOOR, "1", "cpu_per_request")
        base = _get(clients, "polythink-client", "1", "cpu_per_request")
        rows = []
        for client, data in clients.items():
            cpu = _get(data, "1", "cpu_per_request")
            layered = client.startswith("polythink-client+") or client == "polythink-full-aiohttp"
            added = "-"
            if layered and cpu is not None and base is not None:
                added = f"{(cpu - base) * 1e6:+,.0f}"
            rows.append([client, _us(cpu), _x(_ratio(cpu, floor)), added])
        out.append(
            (
                "Where the CPU goes: one option group at a time, aiohttp layer, concurrency 1 "
                "(µs per request)",
                ["client", "CPU", "× raw httpx", "added to polythink-client"],
                rows,
                _footnotes(layers),
            )
        )
        out.extend(_user_layer_table(layers.get("user_layer")))
    stream = scenarios.get("stream")
    if stream:
        rows = []
        clients = stream["clients"]
        floor = clients.get(FLOOR, {})
        for client, data in clients.items():
            overhead = None
            if data.get("ttft_p50") is not None and floor.get("ttft_p50") is not None:
                overhead = data["ttft_p50"] - floor["ttft_p50"]
            rows.append(
                [
                    client,
                    f"{data['cpu_per_delta'] * 1e6:,.1f}",
                    _x(_ratio(data.get("cpu_per_delta"), floor.get("cpu_per_delta"))),
                    _us(data.get("cpu_per_stream")),
                    _ms(data.get("ttft_p50")),
                    "-" if overhead is None else f"{overhead * 1e3:+,.2f}",
                    _ms(data.get("ttft_p99")),
                    f"{data.get('deltas_per_stream', 0):g}",
                    f"{data.get('complete_streams', 0)}/{data.get('n', 0)}",
                ]
            )
        out.append(
            (
                f"Streaming, {stream['deltas_per_stream']} text and reasoning deltas per stream, "
                f"one every {stream.get('chunk_delay', 0) * 1e3:g} ms, concurrency "
                f"{stream['concurrency']} (CPU µs; time to first delta, ms)",
                [
                    "client",
                    "CPU/delta",
                    "× raw",
                    "CPU/stream",
                    "TTFT p50",
                    "TTFT vs raw",
                    "TTFT p99",
                    "deltas/stream",
                    "complete",
                ],
                rows,
                _footnotes(stream),
            )
        )
    cache = scenarios.get("cache")
    if cache:
        rows = [
            [
                client,
                _us(data["hit_p50"]),
                _us(data["round_trip_p50"]),
                _x(_ratio(data["hit_p50"], data["round_trip_p50"])),
                f"{data['hits_served']}/{data['n']}",
            ]
            for client, data in cache["clients"].items()
        ]
        out.append(
            (
                "Cache hits vs a loopback round trip (µs, p50)",
                ["client", "hit", "round trip (raw httpx)", "ratio", "hits served"],
                rows,
                _footnotes(cache),
            )
        )
    faults = scenarios.get("faults")
    if faults:
        rows = []
        for client, data in faults["clients"].items():
            rows.append(
                [
                    client,
                    f"{data['success_rate'] * 100:.1f} %",
                    _ms(data["clean_mean"]),
                    _ms(data["mean"]),
                    f"{(data['mean'] - data['clean_mean']) * 1e3:+,.1f}",
                    _ms(data["p99"]),
                    f"{data['upstream_per_call']:.3f}",
                    ", ".join(f"{k}: {v}" for k, v in sorted(data["faults_injected"].items()))
                    or "-",
                ]
            )
        out.append(
            (
                f"Fault mix ({faults.get('mix', '')}), concurrency 8 (latency of successes, ms)",
                [
                    "client",
                    "success",
                    "mean, no faults",
                    "mean, faults",
                    "extra",
                    "p99, faults",
                    "upstream calls per call",
                    "faults injected",
                ],
                rows,
                _footnotes(faults),
            )
        )
    limits = scenarios.get("ratelimit")
    if limits:
        rows = [
            [
                client,
                f"{data['rpm_configured']:,}",
                f"{data['rpm_steady']:,.0f}",
                f"{data['rpm_steady_phase']:,.0f}",
                str(data["max_concurrency"]),
                str(data["max_in_flight"]),
                str(data["errors"]),
            ]
            for client, data in limits["clients"].items()
        ]
        out.append(
            (
                "Rate-limit adherence (32 callers, 10 ms simulated latency; the one-minute "
                "burst, then steady traffic)",
                [
                    "client",
                    "configured RPM",
                    "achieved RPM (second half)",
                    "whole steady phase",
                    "concurrency cap",
                    "max in flight",
                    "errors",
                ],
                rows,
                _footnotes(limits),
            )
        )
    memory = scenarios.get("memory")
    if memory:
        rows = [
            [
                client,
                f"{data['deltas']:,}",
                _mib(data["rss_growth_kib"]),
                f"{data['cpu_per_delta'] * 1e6:,.1f}",
            ]
            for client, data in memory["clients"].items()
        ]
        out.append(
            (
                f"Memory: one stream of {memory['words']:,} answer words",
                ["client", "deltas", "peak RSS growth MiB", "CPU/delta µs"],
                rows,
                _footnotes(memory),
            )
        )
    imports = scenarios.get("import")
    if imports:
        seconds = imports["seconds"]
        base = seconds.get("httpx")
        rows = [
            [module, _ms(value), _x(_ratio(value, base))]
            for module, value in sorted(seconds.items(), key=lambda item: item[1])
        ]
        notes = [f"{module}: {why}" for module, why in imports["skipped"].items()]
        if imports.get("polythink_heaviest"):
            heaviest = ", ".join(f"{n} {s * 1e3:.0f} ms" for n, s in imports["polythink_heaviest"])
            notes.append(f"import polythink loads (cumulative, -X importtime): {heaviest}")
        notes.append(
            "cumulative time of the module as python -X importtime reports it, fastest of "
            f"{imports.get('reps', 1)} fresh interpreters"
            + (", every module loaded from bytecode" if imports.get("from_bytecode") else "")
        )
        out.append(("Import time (ms)", ["module", "import", "× httpx"], rows, notes))
    met = {True: "met", False: "missed", None: "not measured"}
    rows = [
        [t["target"], _measured(t), met[t["met"]] + (f" ({t['note']})" if t["note"] else "")]
        for t in results.get("targets", [])
    ]
    out.append(("Targets", ["target", "measured", "result"], rows, []))
    return out


def _conversation_tables(scenario: dict[str, Any] | None) -> list[Table]:
    if not scenario or not scenario.get("clients"):
        return []
    clients = scenario["clients"]
    names = list(clients)
    floor = clients.get(FLOOR, {})
    sizes = list(_get(floor, "sizes") or next(iter(clients.values()))["sizes"])
    rows = []
    for size in sizes:
        any_data = next(c["sizes"][size] for c in clients.values() if size in c["sizes"])
        row = [size, f"{any_data['body_bytes'] / 1024:,.0f}"]
        for name in names:
            cpu = _get(clients, name, "sizes", size, "cpu_per_call")
            ratio = _ratio(cpu, _get(floor, "sizes", size, "cpu_per_call"))
            row.append(_us(cpu) + ("" if name == FLOOR or ratio is None else f" ({_x(ratio)})"))
        rows.append(row)
    rows.append(["peak RSS MiB", "", *(_mib(_get(clients, n, "peak_rss_kib")) for n in names)])
    tables: list[Table] = [
        (
            f"Conversation size, {scenario.get('tools', 30)} tools, one call at a time "
            "(client CPU per call, µs; × raw httpx)",
            ["messages", "body KiB", *names],
            rows,
            _footnotes(scenario),
        )
    ]
    agent_rows = []
    for name in names:
        agent = _get(clients, name, "agent")
        if agent is None:
            continue
        agent_rows.append(
            [
                name,
                _us(agent["first_tenth"]),
                _us(agent["last_tenth"]),
                f"{(agent['last_tenth'] - agent['first_tenth']) * 1e6:+,.0f}",
            ]
        )
    if agent_rows:
        first = next(c["agent"] for c in clients.values() if "agent" in c)
        start, turns = first["start"], first["turns"]
        tables.append(
            (
                f"Agent loop: {turns} turns from {start} messages, two messages added a turn "
                "(client CPU per turn, µs)",
                ["client", "first tenth", "last tenth", "growth"],
                agent_rows,
                [
                    f"the conversation grows from {start + 1} to {start + 2 * turns - 1} "
                    "messages; every client serialises the whole body every turn, so "
                    "raw httpx's growth is the floor"
                ],
            )
        )
    return tables


_USER_LAYER_ROWS = (
    ("passthrough", "built-in Passthrough, folded as polythink folds its own layers"),
    ("noop-unchecked", "a no-op layer overriding both methods, folded the same way"),
    ("user-noop", "the same no-op layer as Client(middleware=[...]), with its checks"),
    ("user-inherited", "a Passthrough subclass overriding nothing (the same chain as none)"),
)


def _user_layer_table(result: dict[str, Any] | None) -> list[Table]:
    """One user layer against the built-in Passthrough, added to a chain with no layer."""
    if not result:
        return []
    if "error" in result:
        return [("One user layer, in-process", ["error"], [[str(result["error"])]], [])]
    call, event = result["added_per_call"], result["added_per_event"]
    base = call.get("passthrough")
    rows = [
        [
            f"{name}: {what}",
            f"{call[name] * 1e6:.3f}",
            _x(_ratio(call[name], base)),
            f"{event[name] * 1e6:.3f}",
        ]
        for name, what in _USER_LAYER_ROWS
        if name in call
    ]
    floor = result["per_call"]["none"], result["per_event"]["none"]
    return [
        (
            "One user layer, in-process: added to a chain with no layer (µs; fastest of "
            f"{result['rounds']} rounds of {result['calls']:,} calls and {result['streams']} "
            f"streams of {result['events']} events)",
            ["layer", "per call", "× Passthrough", "per event"],
            rows,
            [
                f"the chain with no layer: {floor[0] * 1e6:.3f} µs a call, "
                f"{floor[1] * 1e6:.3f} µs an event (benchmarks/user_layers.py)"
            ],
        )
    ]


def _footnotes(scenario: dict[str, Any]) -> list[str]:
    notes = [f"{c}: skipped, {why}" for c, why in scenario.get("skipped", {}).items()]
    notes += [f"{c}: failed, {why}" for c, why in scenario.get("errors", {}).items()]
    notes += list(scenario.get("notes", []))
    return notes


def print_tables(results: dict[str, Any]) -> None:
    """Print every table to the terminal with rich."""
    from rich.console import Console
    from rich.table import Table as RichTable
    from rich.text import Text

    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        # Piped output has no width to fit; whole rows read better in logs.
        console.width = 200
    for title, headers, rows, notes in tables(results):
        table = RichTable(title=title, title_justify="left")
        for i, header in enumerate(headers):
            table.add_column(header, justify="left" if i == 0 else "right")
        for row in rows:
            table.add_row(*(Text(cell) for cell in row))
        console.print(table)
        for note in notes:
            console.print(Text(f"  {note}", style="dim"))
    console.print(Text(_machine_line(results), style="dim"))


def _machine_line(results: dict[str, Any]) -> str:
    m = results.get("machine", {})
    before = ", ".join(f"{x:.2f}" for x in results.get("load_average_before", []))
    after = ", ".join(f"{x:.2f}" for x in results.get("load_average_after", []))
    return (
        f"{results.get('mode')} run of {results.get('started')}, "
        f"{results.get('duration_seconds')} s on {m.get('cpu')}, {m.get('cores')} cores, "
        f"{m.get('memory_gib')} GiB, {m.get('os')}, Python {m.get('python')}; "
        f"load average before {before}, after {after}"
    )


def markdown(results: dict[str, Any]) -> str:
    """The tables as Markdown, with the machine and versions, for the README."""
    lines = [f"*{_machine_line(results)}.*", ""]
    versions = results.get("machine", {}).get("versions", {})
    if versions:
        lines.append("Versions: " + ", ".join(f"{k} {v}" for k, v in versions.items() if v) + ".")
        lines.append("")
    for title, headers, rows, notes in tables(results):
        lines.append(f"**{title}**")
        lines.append("")
        lines.append("| " + " | ".join(headers) + " |")
        lines.append("|" + "|".join(["---"] + ["--:"] * (len(headers) - 1)) + "|")
        for row in rows:
            lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
        lines.append("")
        for note in notes:
            lines.append(f"- {note}")
        if notes:
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def update_readme(results: dict[str, Any], readme: Path) -> None:
    """Replace the text between the README's results markers with this run's tables."""
    text = readme.read_text()
    block = f"{README_START}\n{markdown(results)}{README_END}"
    pattern = re.compile(re.escape(README_START) + ".*?" + re.escape(README_END), re.S)
    readme.write_text(pattern.sub(lambda _: block, text) if pattern.search(text) else text)


def _bars(
    path: Path,
    title: str,
    labels: Sequence[str],
    series: dict[str, Sequence[float]],
    unit: str,
) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    height = max(2.5, 0.45 * len(labels) * max(1, len(series)) + 1.2)
    figure, axes = plt.subplots(figsize=(8, height))
    width = 0.8 / max(1, len(series))
    for k, (name, values) in enumerate(series.items()):
        positions = [i + k * width for i in range(len(labels))]
        bars = axes.barh(positions, values, height=width, label=name)
        axes.bar_label(bars, labels=[f"{v:,.1f}" for v in values], padding=3, fontsize=8)
    axes.set_yticks([i + width * (len(series) - 1) / 2 for i in range(len(labels))], labels)
    axes.invert_yaxis()
    axes.set_xlabel(unit)
    axes.set_title(title, fontsize=10)
    if len(series) > 1:
        axes.legend(fontsize=8, loc="lower right")
    axes.margins(x=0.15)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def charts(results: dict[str, Any], out: Path, mode: str) -> list[Path]:
    """Write one PNG per scenario with figures worth a picture; return their paths."""
    scenarios = results.get("scenarios", {})
    made: list[Path] = []
    load = _get(scenarios, "load", "clients")
    if load:
        labels = list(load)
        made.append(
            _bars(
                out / f"{mode}-load-cpu.png",
                "Client CPU per non-streaming request",
                labels,
                {
                    f"concurrency {level}": [
                        (_get(load, c, level, "cpu_per_request") or 0.0) * 1e6 for c in labels
                    ]
                    for level in ("1", "64")
                },
                "µs of CPU per request",
            )
        )
        made.append(
            _bars(
                out / f"{mode}-load-latency.png",
                "Latency at concurrency 64",
                labels,
                {
                    q: [(_get(load, c, "64", q) or 0.0) * 1e3 for c in labels]
                    for q in ("p50", "p99")
                },
                "ms",
            )
        )
    conversation = _get(scenarios, "conversation", "clients")
    if conversation:
        made.extend(_conversation_charts(conversation, out, mode))
    stream = _get(scenarios, "stream", "clients")
    if stream:
        labels = list(stream)
        made.append(
            _bars(
                out / f"{mode}-stream-cpu.png",
                "Client CPU per streamed delta (concurrency 16)",
                labels,
                {"CPU per delta": [stream[c]["cpu_per_delta"] * 1e6 for c in labels]},
                "µs of CPU per delta",
            )
        )
    memory = _get(scenarios, "memory", "clients")
    if memory:
        labels = list(memory)
        made.append(
            _bars(
                out / f"{mode}-memory.png",
                "Peak RSS growth over one long stream",
                labels,
                {"growth": [memory[c]["rss_growth_kib"] / 1024 for c in labels]},
                "MiB",
            )
        )
    seconds = _get(scenarios, "import", "seconds")
    if seconds:
        labels = sorted(seconds, key=lambda m: seconds[m])
        made.append(
            _bars(
                out / f"{mode}-import.png",
                "Import time",
                labels,
                {"import": [seconds[m] * 1e3 for m in labels]},
                "ms",
            )
        )
    return made


def _conversation_charts(clients: dict[str, Any], out: Path, mode: str) -> list[Path]:
    """Cost against conversation size (log-log), and CPU per agent-loop turn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 4.5))
    for name, data in clients.items():
        sizes = [int(s) for s in data["sizes"]]
        cpu = [data["sizes"][str(s)]["cpu_per_call"] * 1e3 for s in sizes]
        axes.plot(sizes, cpu, marker="o", label=name)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("messages in the conversation (30 tools)")
    axes.set_ylabel("ms of client CPU per call")
    axes.set_title("Client CPU per call against conversation size", fontsize=10)
    axes.legend(fontsize=8)
    figure.tight_layout()
    size_chart = out / f"{mode}-conversation.png"
    figure.savefig(size_chart, dpi=110)
    plt.close(figure)

    figure, axes = plt.subplots(figsize=(8, 4.5))
    for name, data in clients.items():
        per_turn = data["agent"]["cpu_per_turn"]
        window = max(1, len(per_turn) // 20)
        smooth = [
            sum(per_turn[max(0, i - window + 1) : i + 1])
            / len(per_turn[max(0, i - window + 1) : i + 1])
            for i in range(len(per_turn))
        ]
        axes.plot(range(1, len(per_turn) + 1), [v * 1e3 for v in smooth], label=name)
    axes.set_yscale("log")
    axes.set_xlabel("turn")
    axes.set_ylabel("ms of client CPU per turn (running mean)")
    axes.set_title("Agent loop: CPU per turn as the conversation grows", fontsize=10)
    axes.legend(fontsize=8)
    figure.tight_layout()
    agent_chart = out / f"{mode}-agent.png"
    figure.savefig(agent_chart, dpi=110)
    plt.close(figure)
    return [size_chart, agent_chart]
