"""``polythink models``: the capability registry, with where each fact comes from (observed >
documented > imported > inferred), and what was learned.

- ``--learned`` lists what was learned on the wire (with the endpoint each observation
  applies to) and imported, and suspected stale entries, with their evidence.
- ``--levels MODEL`` prints the tiers a selector should offer for a model and the one to
  preselect.
- ``--retired`` lists deprecated and retired models with their dates and replacements.
- ``--stale`` lists the entries a maintainer should review (evidence older than
  ``--older-than`` days, past their shutdown date, or contradicted on the wire or by an
  import) and what the last catalogue refresh changed.
- ``--refresh`` refreshes the catalogues now (:mod:`polythink.refresh`) and says what
  changed.
- ``models forget MODEL`` drops what was learned about a model; ``models import openrouter
  FILE.json`` stores an OpenRouter ``/api/v1/models`` document as imported, and ``models
  import litellm [FILE.json]`` LiteLLM's model map (the installed ``litellm`` package's copy
  when no file is given).

``--store PATH`` names the capability store file (default: the per-user one, see
:mod:`polythink.capability_store`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import Sequence
from typing import Any

from rich.table import Table
from rich.text import Text

from polythink.capability_store import CapabilityStore, open_store
from polythink.cli import arguments
from polythink.cli.arguments import Commands, Parser
from polythink.cli.output import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    PIPE_WIDTH,
    WIDE,
    new_console,
    renders_whole,
)
from polythink.providers import PROVIDERS, get_provider
from polythink.reasoning import Capability, all_capabilities, get_capability
from polythink.reasoning.lifecycle import status as lifecycle_status
from polythink.reasoning.serving import serving
from polythink.types import Effort

__all__ = ["add_parser"]


_STALE_DAYS = 90
"""``models --stale``: evidence last checked longer ago than this many days is listed."""


def add_parser(commands: Commands) -> Parser:
    """Add ``polythink models`` (and its ``forget`` and ``import`` actions) to ``commands``."""
    providers = list(PROVIDERS)
    listing = ", ".join(providers)
    models = commands.add_parser(
        "models",
        help="print the capability registry, what was learned, and a model's tiers",
        description="Print every known model, one line each: provider, model, accepted tiers, "
        "default tier. --evidence adds budgets, output limits, where each entry comes from "
        "(observed > documented > imported > inferred) and its evidence.",
    )
    models.add_argument("--provider", choices=providers, metavar="P", help=listing)
    models.add_argument(
        "--evidence", action="store_true", help="a table with budgets, limits and sources"
    )
    models.add_argument("--json", action="store_true", help="print JSON")
    models.add_argument(
        "--base-url",
        type=arguments.url_root,
        metavar="URL",
        help="read what was observed at this endpoint (default: each provider's own)",
    )
    models.add_argument(
        "--store",
        metavar="PATH",
        help="the capability store file (default: $POLYTHINK_CAPABILITIES, else "
        "capabilities.json in the user cache directory)",
    )
    shown = models.add_mutually_exclusive_group()
    shown.add_argument(
        "--learned",
        action="store_true",
        help="list learned and imported entries and suspected stale ones, with evidence",
    )
    shown.add_argument(
        "--levels",
        type=arguments.model_id,
        metavar="MODEL",
        help="print the tiers a selector should offer for MODEL, cheapest first, and its default",
    )
    shown.add_argument(
        "--retired",
        action="store_true",
        help="list deprecated and retired models with their dates and replacements",
    )
    shown.add_argument(
        "--refresh",
        action="store_true",
        help="fetch LiteLLM's model map and OpenRouter's /models now (the client does it at "
        "most once a day) and say what changed",
    )
    shown.add_argument(
        "--stale",
        action="store_true",
        help="list entries to review: evidence older than --older-than days, past their "
        "shutdown date, or contradicted on the wire or by an import, and what the last "
        "catalogue refresh changed",
    )
    models.add_argument(
        "--older-than",
        type=arguments.positive_days,
        metavar="DAYS",
        help=f"with --stale: evidence checked longer ago than DAYS (default {_STALE_DAYS})",
    )
    models.set_defaults(handler=_cmd_models)
    actions = models.add_subparsers(dest="action", metavar="action", parser_class=Parser)
    forget = actions.add_parser(
        "forget",
        help="drop what was learned or imported about a model",
        description=(
            "Drop the learned and imported entries and suspicions of MODEL from the store."
        ),
    )
    forget.add_argument("model", type=arguments.model_id, metavar="MODEL")
    forget.add_argument(
        "--provider",
        choices=providers,
        metavar="P",
        dest="forget_provider",
        help="only what was observed on this provider",
    )
    forget.set_defaults(handler=_cmd_models_forget)
    imports = actions.add_parser(
        "import",
        help="store a catalogue as imported capabilities",
        description="Read a catalogue into the capability store (below the shipped registry).",
    )
    imports.add_argument("catalogue", choices=("openrouter", "litellm"), help="openrouter, litellm")
    imports.add_argument(
        "file",
        metavar="FILE.json",
        nargs="?",
        help="an OpenRouter /api/v1/models document, or LiteLLM's "
        "model_prices_and_context_window.json (default for litellm: the installed litellm "
        "package's copy)",
    )
    imports.set_defaults(handler=_cmd_models_import)
    return models


def _cmd_models(args: argparse.Namespace) -> int:
    store = _store(args)
    if store is None:
        return EXIT_FAILED
    if args.levels is not None:
        return _cmd_levels(args, store)
    if args.learned:
        return _cmd_learned(args, store)
    if args.retired:
        return _cmd_retired(args, store)
    if args.stale:
        return _cmd_stale(args, store)
    if args.refresh:
        return _cmd_refresh(args, store)
    provider = get_provider(args.provider).serves if args.provider else None
    caps = all_capabilities(provider)
    known = [store.lookup(c.provider, c.model, args.base_url) for c in caps]
    listed = {(c.provider, c.model) for c in caps}
    for entry in store.entries():
        if entry.origin == "imported" and provider not in (None, "openrouter"):
            continue
        if entry.provider is not None and provider not in (None, entry.provider):
            continue
        if get_capability(entry.model) is None and (entry.provider, entry.model) not in listed:
            listed.add((entry.provider, entry.model))
            found = store.lookup(entry.provider, entry.model, args.base_url)
            fallback = Capability(entry.model, (Effort.NONE,), provider=entry.provider)
            caps.append(found.capability or fallback)
            known.append(found)
    if args.json:
        rows = []
        for cap, fact in zip(caps, known, strict=True):
            row = _capability_json(fact.capability or cap)
            row["origin"] = fact.origin
            row["takes_parameter"] = fact.takes_parameter
            rows.append(row)
        print(json.dumps(rows, ensure_ascii=False))
        return EXIT_OK
    if not caps:
        print(
            f"no models registered for provider {args.provider!r}; a model of another "
            "provider resolves by its name (polythink resolve --model M)"
        )
        return EXIT_OK
    console = new_console()
    table = _models_evidence(caps, known) if args.evidence else None
    cells = _evidence_cells(caps, known)
    if table is not None and console.width >= WIDE and renders_whole(table, console.width, cells):
        console.print(table)
    elif args.evidence:
        for line in _models_evidence_blocks(caps, known, console.width):
            print(line)
    else:
        for line in _models_lines(caps, known, console.width):
            print(line)
    return EXIT_OK


def _store(args: argparse.Namespace) -> CapabilityStore | None:
    try:
        return open_store(args.store)
    except ValueError as exc:
        print(f"polythink models: {exc}", file=sys.stderr)
        return None


def _tiers(efforts: Sequence[Effort]) -> str:
    return " ".join(e.value for e in efforts) or "-"


def _capability_json(cap: Capability) -> dict[str, Any]:
    return {
        "model": cap.model,
        "provider": cap.provider,
        "supported_efforts": [e.value for e in cap.supported_efforts],
        "default_effort": cap.default_effort.value if cap.default_effort else None,
        "budget_min": cap.budget_min,
        "budget_max": cap.budget_max,
        "max_output_tokens": cap.max_output_tokens,
        "context_window": cap.context_window,
        "evidence": cap.evidence,
        "aliases": list(cap.aliases),
    }


def _budget_range(cap: Capability) -> str:
    if cap.budget_min is None and cap.budget_max is None:
        return "-"
    low = "" if cap.budget_min is None else str(cap.budget_min)
    high = "" if cap.budget_max is None else str(cap.budget_max)
    return f"{low}-{high}"


def _cmd_models_forget(args: argparse.Namespace) -> int:
    store = _store(args)
    if store is None:
        return EXIT_FAILED
    dropped = store.forget(args.model, args.forget_provider)
    if not dropped:
        print(f"nothing learned or imported about {args.model!r} in {store.path or 'memory'}")
        return EXIT_FAILED
    print(f"forgot {dropped} entr{'y' if dropped == 1 else 'ies'} about {args.model!r}")
    return EXIT_OK


def _cmd_models_import(args: argparse.Namespace) -> int:
    from polythink.importers import find_litellm_map, import_litellm

    if args.catalogue == "openrouter" and args.file is None:
        print(
            "polythink models import: error: openrouter needs FILE.json, an OpenRouter "
            "/api/v1/models document",
            file=sys.stderr,
        )
        return EXIT_USAGE
    store = _store(args)
    if store is None:
        return EXIT_FAILED
    try:
        if args.catalogue == "openrouter":
            count, source = store.import_openrouter(args.file), str(args.file)
        else:
            source = str(find_litellm_map(args.file)[0])
            count = import_litellm(store, args.file)
    except ValueError as exc:
        print(f"polythink models import: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"imported {count} models from {source} into {store.path or 'memory'}")
    return EXIT_OK


def _cmd_levels(args: argparse.Namespace, store: CapabilityStore) -> int:
    # On the profile a client's source of this provider uses for the model (Converse for a
    # bedrock source of Nova), where the reasoning layer records what it observes.
    provider = serving(args.provider, args.levels).lookup_provider if args.provider else None
    found = store.levels(args.levels, provider, args.base_url)
    if args.json:
        result = {
            "model": args.levels,
            "levels": [e.value for e in found.levels],
            "default": found.default.value if found.default else None,
            "origin": found.origin,
        }
        print(json.dumps(result, ensure_ascii=False))
        return EXIT_OK
    if not found.levels:
        print(f"{args.levels}: no reasoning control ({found.origin})")
        return EXIT_OK
    default = found.default.value if found.default else "-"
    print(f"{args.levels}: {_tiers(found.levels)} (default {default}; {found.origin})")
    return EXIT_OK


_UNSCOPED = "unknown (recorded before scoping; applies to no call)"
"""What ``models --learned`` shows as the endpoint of an observation from a format-1 file."""


def _endpoint_shown(origin: str, endpoint: str | None) -> str:
    """The endpoint an entry applies to, as ``models --learned`` shows it."""
    if endpoint is not None:
        return endpoint
    return "any" if origin == "imported" else _UNSCOPED


def _learned_rows(store: CapabilityStore) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for entry in store.entries():
        shipped = get_capability(entry.model)
        cap = entry.capability
        rows.append(
            {
                "kind": entry.origin,
                "model": entry.model,
                "provider": entry.provider,
                "endpoint": _endpoint_shown(entry.origin, entry.endpoint),
                "tiers": [e.value for e in cap.supported_efforts] if cap else None,
                "registry": [e.value for e in shipped.supported_efforts] if shipped else None,
                "evidence": entry.evidence,
                "date": entry.date,
            }
        )
    for hint in store.suspicions():
        if hint.kind == "reasoned_when_off":
            seen = "reasoned although asked none"
        else:
            seen = "reported 0 reasoning tokens"
        rows.append(
            {
                "kind": "suspected",
                "model": hint.model,
                "provider": hint.provider,
                "endpoint": _endpoint_shown("observed", hint.endpoint),
                "tier": hint.tier,
                "contradiction": hint.kind,
                "count": hint.count,
                "evidence": (
                    f"{hint.count} answers at reasoning_effort={hint.tier!r} "
                    f"{seen}"
                    f" ({hint.first_seen} to {hint.last_seen}); the registry entry says: "
                    f"{hint.registry}"
                ),
                "date": hint.last_seen,
            }
        )
    return rows


def _cmd_learned(args: argparse.Namespace, store: CapabilityStore) -> int:
    rows = _learned_rows(store)
    if args.provider is not None:
        rows = [r for r in rows if r["provider"] in (None, args.provider)]
    if args.json:
        print(json.dumps(rows, ensure_ascii=False))
        return EXIT_OK
    if not rows:
        print(f"nothing learned, imported or suspected in {store.path or 'memory'}")
        return EXIT_OK
    table = Table(title=f"learned capabilities ({store.path or 'memory'})", title_justify="left")
    for name in ("kind", "model", "provider", "endpoint", "now", "registry", "evidence"):
        table.add_column(name, overflow="fold")
    for row in rows:
        if row["kind"] == "suspected":
            now, registry = f"suspect at {row['tier']}", "-"
        else:
            tiers = row["tiers"]
            now = "no reasoning parameter" if tiers is None else " ".join(tiers)
            registry = " ".join(row["registry"]) if row["registry"] else "-"
        cells = (
            row["kind"],
            row["model"],
            row["provider"] or "any",
            row["endpoint"],
            now,
            registry,
            row["evidence"],
        )
        table.add_row(*(Text(cell) for cell in cells))
    new_console().print(table)
    return EXIT_OK


def _print_rows(args: argparse.Namespace, rows: list[dict[str, Any]], empty: str) -> int:
    """Print ``rows`` as JSON (``--json``) or one aligned line each (their values in order)."""
    if args.json:
        print(json.dumps(rows, ensure_ascii=False))
        return EXIT_OK
    if not rows:
        print(empty)
        return EXIT_OK
    cells = [[str(v) if v is not None else "-" for v in row.values()] for row in rows]
    cells.insert(0, list(rows[0]))
    widths = [max(len(line[i]) for line in cells) for i in range(len(cells[0]) - 1)]
    for line in cells:
        print("  ".join([*(c.ljust(w) for c, w in zip(line, widths, strict=False)), line[-1]]))
    return EXIT_OK


def _retired_rows(store: CapabilityStore, provider: str | None) -> list[dict[str, Any]]:
    today = store.today()
    rows = []
    for cap in all_capabilities(provider):
        state = lifecycle_status(cap, today)
        if state == "current":
            continue
        rows.append(
            {
                "provider": cap.provider,
                "model": cap.model,
                "status": state,
                "deprecated": cap.deprecated,
                "shutdown": cap.shutdown,
                "replacement": cap.replacement,
            }
        )
    return sorted(rows, key=lambda r: (r["status"] != "retired", r["shutdown"] or "", r["model"]))


def _cmd_retired(args: argparse.Namespace, store: CapabilityStore) -> int:
    provider = get_provider(args.provider).serves if args.provider else None
    rows = _retired_rows(store, provider)
    return _print_rows(args, rows, f"no deprecated or retired model as of {store.today()}")


def _stale_rows(
    store: CapabilityStore, provider: str | None, older_than: int
) -> list[dict[str, Any]]:
    """The registry entries to review, each with every reason it is listed."""
    today = datetime.date.fromisoformat(store.today())
    reasons: dict[str, list[str]] = {}
    caps = {cap.model: cap for cap in all_capabilities(provider)}
    for cap in caps.values():
        found = reasons.setdefault(cap.model, [])
        checked = cap.checked
        if checked is None:
            found.append("no checked date")
        elif (today - datetime.date.fromisoformat(checked)).days > older_than:
            found.append(
                f"checked {checked}, {(today - datetime.date.fromisoformat(checked)).days} days ago"
            )
        if lifecycle_status(cap, today) == "retired":
            instead = f", replacement {cap.replacement}" if cap.replacement else ""
            found.append(f"shut down {cap.shutdown}{instead}")
    for entry in store.entries():
        shipped = get_capability(entry.model)
        if shipped is None or shipped.model not in caps:
            continue
        now = entry.capability.supported_efforts if entry.capability is not None else ()
        if entry.capability is None or now != shipped.supported_efforts:
            tiers = " ".join(t.value for t in now) if now else "no reasoning parameter"
            where = f"on {entry.provider}" if entry.origin == "observed" else "by an import"
            reasons[shipped.model].append(
                f"contradicted {where} {entry.date}: {tiers} ({entry.evidence})"
            )
    for refreshed in store.catalogue.entries() if store.catalogue is not None else ():
        shipped = get_capability(refreshed.model)
        if shipped is None or shipped.model not in caps:
            continue
        if shipped.evidence.lower().startswith("inferred"):
            continue
        now = refreshed.capability.supported_efforts if refreshed.capability is not None else ()
        if now != shipped.supported_efforts:
            tiers = " ".join(t.value for t in now) if now else "no reasoning parameter"
            reasons[shipped.model].append(
                f"contradicted by the refreshed {refreshed.source} catalogue: {tiers} "
                f"({refreshed.evidence})"
            )
    for hint in store.suspicions():
        shipped = get_capability(hint.model)
        if shipped is not None and shipped.model in caps:
            reasons[shipped.model].append(
                f"suspected on {hint.provider}: {hint.count} answers at {hint.tier} contradicted it"
            )
    return [
        {"provider": caps[model].provider, "model": model, "reasons": "; ".join(why)}
        for model, why in reasons.items()
        if why
    ]


def _cmd_stale(args: argparse.Namespace, store: CapabilityStore) -> int:
    provider = get_provider(args.provider).serves if args.provider else None
    days = _STALE_DAYS if args.older_than is None else args.older_than
    rows = _stale_rows(store, provider, days)
    report = _last_refresh(store)
    if report is not None:
        rows += _refresh_rows(report, provider)
        if not args.json:
            for source in report.sources:
                print(f"refresh {report.at}  {source.source}: {source.status}: {source.message}")
    return _print_rows(args, rows, f"nothing to review as of {store.today()}")


def _last_refresh(store: CapabilityStore) -> Any:
    from polythink.refresh import last_report

    return None if store.catalogue is None else last_report(store.catalogue.directory)


def _refresh_rows(report: Any, provider: str | None) -> list[dict[str, Any]]:
    """The models whose tiers the last catalogue refresh changed (added and removed models
    are counted in its message, not listed)."""
    rows = []
    for source in report.sources:
        for change in source.changes:
            if change.before is None or change.after is None:
                continue
            shipped = get_capability(change.model)
            owner = shipped.provider if shipped is not None else None
            if provider is not None and owner not in (None, provider):
                continue
            rows.append(
                {
                    "provider": owner,
                    "model": change.model,
                    "reasons": f"changed by the {source.source} refresh of {report.at[:10]}: "
                    f"{change.describe().split(': ', 1)[1]}",
                }
            )
    return rows


def _cmd_refresh(args: argparse.Namespace, store: CapabilityStore) -> int:
    from polythink.refresh import refresh

    if store.catalogue is None:
        print(
            "polythink models: the capability store is in memory only "
            "(POLYTHINK_CAPABILITIES=off): there is no cache directory to refresh into",
            file=sys.stderr,
        )
        return EXIT_FAILED
    report = refresh(store.catalogue.directory)
    if args.json:
        from polythink.refresh import report_json

        print(json.dumps(report_json(report), ensure_ascii=False))
        return EXIT_OK if report.ok else EXIT_FAILED
    for source in report.sources:
        print(f"{source.source}: {source.status}: {source.message}")
        added = [c for c in source.changes if c.before is None]
        removed = [c for c in source.changes if c.after is None]
        changed = [c for c in source.changes if c.before is not None and c.after is not None]
        if added or removed:
            print(f"  {len(added)} added, {len(removed)} removed")
        for change in changed:
            print(f"  {change.describe()}")
    return EXIT_OK if report.ok else EXIT_FAILED


def _models_lines(
    caps: Sequence[Capability], known: Sequence[Any], width: int = PIPE_WIDTH
) -> list[str]:
    """One line per model (provider, model, accepted tiers, default), columns aligned;
    ``?`` for a default that is not known. ``known`` is the store's fact for each entry.

    When the lines would be wider than ``width`` columns, a long tier list wraps onto
    indented continuation lines under the tiers column (the default stays on the model's
    first line), so the listing fits; wide enough, nothing wraps."""
    rows = []
    for shipped, fact in zip(caps, known, strict=True):
        cap = fact.capability or shipped
        rows.append(
            (
                cap.provider or "-",
                cap.model,
                _tiers(cap.supported_efforts) if fact.takes_parameter else "no reasoning parameter",
                cap.default_effort.value if cap.default_effort else "?",
            )
        )
    rows.insert(0, ("provider", "model", "tiers", "default"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lead = widths[0] + 2 + widths[1] + 2
    room = width - lead - 2 - widths[3]
    if widths[2] > room:
        widths[2] = max(room, len("minimal"))
    lines: list[str] = []
    for provider, model, tiers, default in rows:
        parts = _wrap_words(tiers, widths[2])
        head = f"{provider.ljust(widths[0])}  {model.ljust(widths[1])}  "
        lines.append(f"{head}{parts[0].ljust(widths[2])}  {default}")
        lines.extend(" " * lead + part for part in parts[1:])
    return lines


def _wrap_words(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` columns, broken between words (a word longer
    than ``width``, such as a URL, is cut into pieces of ``width``)."""
    lines = [""]
    for whole in text.split(" "):
        pieces = [whole[i : i + width] for i in range(0, len(whole), width)] or [""]
        for word in pieces:
            if lines[-1] and len(lines[-1]) + 1 + len(word) > width:
                lines.append(word)
            else:
                lines[-1] = f"{lines[-1]} {word}" if lines[-1] else word
    return lines


def _models_evidence(caps: Sequence[Capability], known: Sequence[Any]) -> Table:
    """The registry as a table with budgets, output limits and the evidence of each entry.

    Its columns wrap between words and cut a longer word with ``…`` (see
    :func:`renders_whole`, which tells whether anything would be cut)."""
    table = Table(title="polythink capability registry", title_justify="left")
    table.add_column("model")
    table.add_column("provider")
    table.add_column("supported tiers")
    table.add_column("default")
    table.add_column("budget")
    table.add_column("max output", justify="right")
    table.add_column("origin")
    table.add_column("evidence")
    for cells in _evidence_cells(caps, known):
        table.add_row(*(Text(cell) for cell in cells))
    return table


_EVIDENCE_FIELDS = ("tiers", "default", "budget", "max output", "origin", "evidence")


def _evidence_cells(caps: Sequence[Capability], known: Sequence[Any]) -> list[tuple[str, ...]]:
    """(model, provider, tiers, default, budget, max output, origin, evidence) per entry."""
    rows: list[tuple[str, ...]] = []
    for shipped, fact in zip(caps, known, strict=True):
        cap = fact.capability or shipped
        tiers = _tiers(cap.supported_efforts) if fact.takes_parameter else "no reasoning parameter"
        rows.append(
            (
                cap.model,
                cap.provider or "-",
                tiers,
                cap.default_effort.value if cap.default_effort else "?",
                _budget_range(cap),
                str(cap.max_output_tokens) if cap.max_output_tokens is not None else "-",
                fact.origin,
                fact.evidence or cap.evidence,
            )
        )
    return rows


def _models_evidence_blocks(
    caps: Sequence[Capability], known: Sequence[Any], width: int
) -> list[str]:
    """The ``--evidence`` listing for narrow terminals: one block per model, a
    ``model (provider)`` line then one indented ``field  value`` line per field, the
    evidence wrapped between words to ``width`` columns; a blank line between blocks."""
    label = max(len(name) for name in _EVIDENCE_FIELDS)
    indent = 2 + label + 2
    lines: list[str] = []
    for model, provider, *values in _evidence_cells(caps, known):
        if lines:
            lines.append("")
        lines.append(f"{model} ({provider})")
        for name, value in zip(_EVIDENCE_FIELDS, values, strict=True):
            parts = _wrap_words(value, max(width - indent, 20))
            lines.append(f"  {name.ljust(label)}  {parts[0]}")
            lines.extend(" " * indent + part for part in parts[1:])
    return lines
