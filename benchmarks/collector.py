"""What the cyclic collector walks in a polythink process, and what a full collection costs.

``python -m benchmarks.collector`` loads, step by step in one fresh process, what a client
process holds (httpx, polythink, a client with every layer on, the capability registry and
family rules, the OpenTelemetry SDK, the price table, one call's worth of lookups), and
after each step counts the objects the collector tracks and times a full collection
(``gc.collect()``, the fastest of ``--reps``). Last, it calls ``gc.freeze()`` (what an
application may do once it has started) and times a full collection again. It also counts
the tracked objects of each table polythink loads once (reachable from the table, without
classes, functions and modules). ``--json PATH`` writes the figures.

No simulator, no network: the steps only load what a call would load.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["main"]


def _full_collection(reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        started = time.perf_counter()
        gc.collect()
        best = min(best, time.perf_counter() - started)
    return best


def _tracked_from(root: Any) -> int:
    """The tracked objects reachable from ``root`` (classes, functions, modules left out)."""
    skipped = (type, type(gc), type(_tracked_from), type(len))
    seen: set[int] = set()
    stack = [root]
    while stack:
        item = stack.pop()
        if id(item) in seen or not gc.is_tracked(item) or isinstance(item, skipped):
            continue
        seen.add(id(item))
        stack.extend(gc.get_referents(item))
    return len(seen)


def _steps() -> list[tuple[str, Callable[[], None]]]:
    def client() -> None:
        from benchmarks.clients import full_options
        from polythink import Client, Source

        client_kw, source_kw, _ = full_options("low", http="httpx")
        client_kw["cache"] = None
        _held.append(Client([Source("openai", "gpt-5.5", api_key="k", **source_kw)], **client_kw))

    def registry() -> None:
        from polythink.reasoning.capabilities import get_capability

        get_capability("gpt-5.5")
        get_capability("claude-fable-9-9")

    def prices() -> None:
        from polythink.pricing import price
        from polythink.types import Usage

        price(Usage(input_tokens=10, output_tokens=5), "openai", "gpt-5.5")

    def import_httpx() -> None:
        import httpx  # noqa: F401

    def import_polythink() -> None:
        import polythink  # noqa: F401

    return [
        ("the interpreter", lambda: None),
        ("+ import httpx", import_httpx),
        ("+ import polythink", import_polythink),
        ("+ a Client with every layer on (its libraries loaded)", client),
        ("+ the capability registry and family rules", registry),
        ("+ the price table (genai-prices), one model priced", prices),
    ]


_held: list[Any] = []


def _tables() -> dict[str, int]:
    from genai_prices import data_snapshot

    from polythink import providers
    from polythink.reasoning import capabilities, families

    return {
        "capability registry (polythink)": _tracked_from(
            (capabilities._entries, capabilities._index)
        ),
        "family rules (polythink)": _tracked_from(families._families),
        "provider profiles (polythink)": _tracked_from(providers.PROVIDERS),
        "price table (genai-prices)": _tracked_from(data_snapshot.get_snapshot()),
    }


def main(argv: list[str] | None = None) -> int:
    """Print the steps and the tables; write ``--json`` when given."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.collector")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = []
    for label, step in _steps():
        step()
        gc.collect()
        rows.append(
            {
                "step": label,
                "tracked": len(gc.get_objects()),
                "full_collection": _full_collection(args.reps),
            }
        )
    tables = _tables()
    gc.collect()
    gc.freeze()
    frozen = {
        "step": "after gc.freeze()",
        "tracked": len(gc.get_objects()),
        "full_collection": _full_collection(args.reps),
    }
    gc.unfreeze()
    rows.append(frozen)
    print(f"{'step':60s} {'tracked':>9s} {'full collection':>16s}")
    for row in rows:
        print(f"{row['step']:60s} {row['tracked']:9,d} {row['full_collection'] * 1e3:13.1f} ms")
    print()
    for name, count in tables.items():
        print(f"{name:40s} {count:7,d} tracked objects")
    if args.json is not None:
        args.json.write_text(json.dumps({"steps": rows, "tables": tables}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
