"""Refresh the registry between releases from maintained catalogues, at most once a day.

A shipped registry is stale within a week: providers add tiers (Gemini 4 gained ``XHIGH``) and
retire models on published dates. Like LiteLLM with its own model map, polythink refreshes
what it knows from catalogues maintained every day:

- LiteLLM's model map (``model_prices_and_context_window.json`` upstream:
  :data:`LITELLM_URL`), read by :func:`polythink.importers.capabilities_from_litellm`;
- OpenRouter's ``GET /api/v1/models`` (:data:`OPENROUTER_URL`, public), read by
  :func:`polythink.reasoning.capabilities_from_openrouter`.

What they say goes to ``catalogues/catalogues.json`` next to the capability store, in the
user's cache directory (:mod:`polythink.catalogues`), and ranks as *imported*: observed >
documented (the shipped registry) > imported > inferred. A refreshed catalogue fills in models
the registry does not list and corrects family guesses; it never overrides the shipped
entries, and ``polythink models --stale`` lists where it disagrees with them.

Rules:

- **At most once a day.** A :class:`~polythink.Client` built on a store file starts a
  refresh when the last attempt (successful or not, recorded in ``catalogues/refresh.json``)
  is older than :data:`REFRESH_EVERY`; ``polythink models --refresh`` runs one now.
- **Never blocking.** The client's refresh runs in a daemon thread with its own short
  timeouts; calls never wait for it and a client started meanwhile uses what was there. A
  failure (offline, a proxy, a 5xx, a document that does not parse) is one log line on the
  ``polythink.refresh`` logger (INFO), and the previous copy stays.
- **Sanity-checked.** A catalogue that would erase most of the entries of the previous copy
  (:data:`MAX_ERASED`), that changes the tiers of most models both copies list
  (:data:`MAX_CHANGED`), or that lists almost nothing (:data:`MIN_MODELS`) is refused with a
  WARNING naming the figures, and the previous copy stays.
- **Off** with ``POLYTHINK_REFRESH=off`` (:data:`ENV_VAR`), for locked-down deployments; also
  off when the store lives in memory only (``POLYTHINK_CAPABILITIES=off``). The catalogue URLs
  can point at a mirror (:data:`URL_VARS`), or at a local file.
- Conditional requests (``If-None-Match``, ``If-Modified-Since``) make an unchanged day cost
  a 304.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx

from polythink.capability_store import CapabilityStore
from polythink.catalogues import (
    CATALOGUE_FILE,
    CATALOGUE_SOURCES,
    CatalogueEntry,
    read_catalogue,
    write_catalogue,
)
from polythink.errors import InvalidInputError
from polythink.reasoning.capabilities import (
    capabilities_from_openrouter,
    normalise_model_name,
    openrouter_without_reasoning,
)
from polythink.reasoning.capability import Capability

__all__ = [
    "ENV_VAR",
    "LITELLM_URL",
    "MAX_CHANGED",
    "MAX_ERASED",
    "MIN_MODELS",
    "OPENROUTER_URL",
    "REFRESH_EVERY",
    "STATE_FILE",
    "URL_VARS",
    "Change",
    "RefreshReport",
    "SourceReport",
    "last_report",
    "refresh",
    "refresh_enabled",
    "report_json",
    "schedule_refresh",
]

ENV_VAR = "POLYTHINK_REFRESH"
"""``off`` (or ``0``, ``false``, ``no``) turns the automatic daily refresh off."""
LITELLM_URL = (
    "https://raw.githubusercontent.com/BerriAI/litellm/main/model_prices_and_context_window.json"
)
"""LiteLLM's model map upstream (the file its ``LITELLM_MODEL_COST_MAP_URL`` defaults to)."""
OPENROUTER_URL = "https://openrouter.ai/api/v1/models"
"""OpenRouter's public model catalogue (OR-DOC, ``GET /api/v1/models``)."""
URL_VARS = {"litellm": "POLYTHINK_LITELLM_URL", "openrouter": "POLYTHINK_OPENROUTER_URL"}
"""Environment variables that point a catalogue at a mirror, or at a local file path."""
REFRESH_EVERY = 24 * 3600.0
"""Seconds between automatic refresh attempts (failed attempts count)."""
MIN_MODELS = 10
"""A catalogue that yields fewer models than this is refused (an error page, a stub)."""
MAX_ERASED = 0.5
"""A catalogue that would erase more than this share of the previous copy's models is refused."""
MAX_CHANGED = 0.5
"""A catalogue that changes the tiers of more than this share of the models both copies list
(and at least :data:`_MIN_COMPARED` of them) is refused."""
STATE_FILE = "refresh.json"
_MIN_COMPARED = 10
_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
_OFF = ("off", "0", "false", "no")
_log = logging.getLogger("polythink.refresh")

Status = Literal["accepted", "unchanged", "refused", "failed"]


@dataclass(frozen=True, slots=True)
class Change:
    """One model whose tiers a refresh changed (``before``/``after``: tiers cheapest first;
    empty = no reasoning parameter; ``None`` = not listed)."""

    model: str
    before: tuple[str, ...] | None
    after: tuple[str, ...] | None

    def describe(self) -> str:
        """``model: low medium high -> low medium high xhigh`` (``added``/``removed``)."""
        if self.before is None:
            return f"{self.model}: added ({_tiers(self.after)})"
        if self.after is None:
            return f"{self.model}: removed (was {_tiers(self.before)})"
        return f"{self.model}: {_tiers(self.before)} -> {_tiers(self.after)}"


def _tiers(tiers: tuple[str, ...] | None) -> str:
    return " ".join(tiers) if tiers else "no reasoning parameter"


@dataclass(frozen=True, slots=True)
class SourceReport:
    """The outcome of refreshing one catalogue.

    Attributes:
        source: ``litellm`` or ``openrouter``.
        url: where it was fetched from.
        status: ``accepted``, ``unchanged`` (304, or the same facts), ``refused`` (the
            sanity checks) or ``failed`` (network, HTTP status, parse).
        message: what happened, in words.
        models: how many models the accepted copy holds.
        changes: what changed against the previous copy.
    """

    source: str
    url: str
    status: Status
    message: str
    models: int = 0
    changes: tuple[Change, ...] = ()


@dataclass(frozen=True, slots=True)
class RefreshReport:
    """One refresh: when, and the outcome per catalogue."""

    at: str
    sources: tuple[SourceReport, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        """Whether every catalogue was accepted or unchanged."""
        return all(s.status in ("accepted", "unchanged") for s in self.sources)


def refresh_enabled() -> bool:
    """Whether the automatic refresh is on (:data:`ENV_VAR` is not ``off``)."""
    return os.environ.get(ENV_VAR, "").strip().lower() not in _OFF


def _url(source: str, urls: Mapping[str, str] | None) -> str:
    if urls is not None and source in urls:
        return urls[source]
    default = LITELLM_URL if source == "litellm" else OPENROUTER_URL
    return os.environ.get(URL_VARS[source]) or default


def _now() -> float:
    return time.time()


def _iso(stamp: float) -> str:
    return datetime.datetime.fromtimestamp(stamp, datetime.UTC).isoformat(timespec="seconds")


def _read_state(directory: Path) -> dict[str, Any]:
    try:
        state = json.loads((directory / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def _write_state(directory: Path, state: Mapping[str, Any]) -> None:
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = directory / f".{STATE_FILE}.{os.getpid()}.{threading.get_ident()}.tmp"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(state, handle, ensure_ascii=False, indent=1)
    os.replace(temporary, directory / STATE_FILE)


def _fetch(
    url: str, client: httpx.Client, previous: Mapping[str, Any]
) -> tuple[Any, dict[str, str]] | None:
    """The parsed document at ``url`` and its validators, or ``None`` for a 304.

    Raises:
        ValueError: an HTTP error, a status other than 200 and 304, or a body that is not
            JSON (the message says which).
    """
    if "://" not in url or url.startswith("file://"):
        path = Path(urlsplit(url).path if url.startswith("file://") else url).expanduser()
        try:
            return json.loads(path.read_text(encoding="utf-8")), {}
        except (OSError, ValueError) as exc:
            raise InvalidInputError(f"cannot read {path}: {exc}") from exc
    headers = {"accept": "application/json"}
    if previous.get("etag"):
        headers["if-none-match"] = str(previous["etag"])
    if previous.get("last_modified"):
        headers["if-modified-since"] = str(previous["last_modified"])
    try:
        response = client.get(url, headers=headers)
    except httpx.HTTPError as exc:
        raise InvalidInputError(f"{type(exc).__name__}: {exc}") from exc
    if response.status_code == 304:
        return None
    if response.status_code != 200:
        raise InvalidInputError(f"HTTP {response.status_code}")
    try:
        document = response.json()
    except ValueError as exc:
        raise InvalidInputError(f"the body is not JSON ({exc})") from exc
    validators = {
        name: response.headers[header]
        for name, header in (("etag", "etag"), ("last_modified", "last-modified"))
        if header in response.headers
    }
    return document, validators


def _entries(source: str, document: Any, evidence: str) -> list[CatalogueEntry]:
    """What one catalogue document says about reasoning, one entry per model.

    Raises:
        ValueError: the document is not such a catalogue.
    """
    caps: list[Capability]
    if source == "litellm":
        from polythink.importers import capabilities_from_litellm

        caps, without = capabilities_from_litellm(document, evidence=evidence)
    else:
        caps = capabilities_from_openrouter(document, evidence=evidence)
        without = openrouter_without_reasoning(document)
    found = [CatalogueEntry(source, cap.model, cap, evidence) for cap in caps]
    found += [CatalogueEntry(source, model, None, evidence) for model in without]
    return found


def _tiers_of(entry: CatalogueEntry) -> tuple[str, ...]:
    cap = entry.capability
    return () if cap is None else tuple(e.value for e in cap.supported_efforts)


def _changes(old: list[CatalogueEntry], new: list[CatalogueEntry]) -> list[Change]:
    before = {normalise_model_name(e.model): e for e in old}
    after = {normalise_model_name(e.model): e for e in new}
    changes = [
        Change(after[k].model, None, _tiers_of(after[k])) for k in after.keys() - before.keys()
    ]
    changes += [
        Change(before[k].model, _tiers_of(before[k]), None) for k in before.keys() - after.keys()
    ]
    changes += [
        Change(after[k].model, _tiers_of(before[k]), _tiers_of(after[k]))
        for k in after.keys() & before.keys()
        if _tiers_of(before[k]) != _tiers_of(after[k])
    ]
    return sorted(changes, key=lambda c: c.model)


def _sanity(old: list[CatalogueEntry], new: list[CatalogueEntry]) -> str | None:
    """Why ``new`` must not replace ``old``, or ``None`` when it may."""
    if len(new) < MIN_MODELS:
        return f"it lists {len(new)} models (fewer than {MIN_MODELS})"
    before = {normalise_model_name(e.model): e for e in old}
    after = {normalise_model_name(e.model): e for e in new}
    erased = len(before.keys() - after.keys())
    if before and erased > MAX_ERASED * len(before):
        return (
            f"it would erase {erased} of the {len(before)} models of the previous copy "
            f"(more than {MAX_ERASED:.0%})"
        )
    both = before.keys() & after.keys()
    changed = sum(1 for k in both if _tiers_of(before[k]) != _tiers_of(after[k]))
    if len(both) >= _MIN_COMPARED and changed > MAX_CHANGED * len(both):
        return (
            f"it would change the tiers of {changed} of the {len(both)} models both copies "
            f"list (more than {MAX_CHANGED:.0%})"
        )
    return None


def refresh(
    directory: str | Path,
    *,
    urls: Mapping[str, str] | None = None,
    http: httpx.Client | None = None,
    clock: Callable[[], float] = _now,
) -> RefreshReport:
    """Fetch each catalogue now, check it, and keep what passes (see the module docstring).

    Args:
        directory: the ``catalogues`` directory (next to the capability store file).
        urls: per source (``litellm``, ``openrouter``), where to fetch it: an ``http(s)`` URL,
            a ``file://`` URL or a path; default :data:`URL_VARS`, else the upstream URLs.
        http: the HTTP client to use (``None``: one of polythink's own, closed afterwards).
        clock: seconds since the epoch, injectable for tests.

    Returns:
        The outcome per catalogue; the state file records it for ``models --stale``. Never
        raises for a network or catalogue problem: it is in the report.
    """
    folder = Path(directory).expanduser()
    started = clock()
    state = _read_state(folder)
    state["attempted"] = _iso(started)
    _write_state(folder, state)  # claim the day before fetching: others wait a day too
    entries, sources = read_catalogue(folder / CATALOGUE_FILE)
    own = http or httpx.Client(timeout=_TIMEOUT, follow_redirects=True)
    reports: list[SourceReport] = []
    kept: dict[str, list[CatalogueEntry]] = {
        name: [e for e in entries if e.source == name] for name in CATALOGUE_SOURCES
    }
    try:
        for name in CATALOGUE_SOURCES:
            report, fresh, meta = _refresh_one(
                name, _url(name, urls), own, kept[name], sources.get(name, {}), started
            )
            reports.append(report)
            if fresh is not None:
                kept[name] = fresh
                sources[name] = meta
    finally:
        if http is None:
            own.close()
    if any(r.status == "accepted" for r in reports):
        write_catalogue(
            folder / CATALOGUE_FILE, [e for name in CATALOGUE_SOURCES for e in kept[name]], sources
        )
    result = RefreshReport(_iso(started), tuple(reports))
    state["last"] = report_json(result)
    _write_state(folder, state)
    return result


def _refresh_one(
    name: str,
    url: str,
    client: httpx.Client,
    old: list[CatalogueEntry],
    meta: Mapping[str, Any],
    started: float,
) -> tuple[SourceReport, list[CatalogueEntry] | None, dict[str, Any]]:
    label = "LiteLLM model map" if name == "litellm" else "OpenRouter /models"
    day = _iso(started)[:10]
    try:
        fetched = _fetch(url, client, meta if old else {})
        if fetched is None:
            text = f"{label} unchanged since {meta.get('fetched', 'the last refresh')} (304)"
            return SourceReport(name, url, "unchanged", text, len(old)), None, {}
        document, validators = fetched
        evidence = f"imported: {label} refreshed from {url} on {day}"
        new = _entries(name, document, evidence)
    except ValueError as exc:
        _log.info(
            "registry refresh: %s from %s failed: %s; kept the previous copy", label, url, exc
        )
        text = f"{label} from {url} failed: {exc}; kept the previous copy"
        return SourceReport(name, url, "failed", text, len(old)), None, {}
    refused = _sanity(old, new)
    if refused is not None:
        _log.warning(
            "registry refresh: refused the %s from %s: %s; kept the previous copy",
            label,
            url,
            refused,
        )
        text = f"refused the {label} from {url}: {refused}; kept the previous copy"
        return SourceReport(name, url, "refused", text, len(old)), None, {}
    changes = tuple(_changes(old, new))
    status: Status = "accepted" if changes or not old else "unchanged"
    text = f"{label} from {url}: {len(new)} models, {len(changes)} changed"
    info = {"url": url, "fetched": _iso(started), "models": len(new), **validators}
    return SourceReport(name, url, status, text, len(new), changes), new, info


def report_json(report: RefreshReport) -> dict[str, Any]:
    """``report`` as JSON values (what ``refresh.json`` keeps and ``models --refresh --json``
    prints)."""
    return {
        "at": report.at,
        "sources": [
            {
                "source": s.source,
                "url": s.url,
                "status": s.status,
                "message": s.message,
                "models": s.models,
                "changes": [
                    {"model": c.model, "before": c.before, "after": c.after} for c in s.changes
                ],
            }
            for s in report.sources
        ],
    }


def last_report(directory: str | Path) -> RefreshReport | None:
    """The last refresh recorded in ``directory`` (``None``: none yet)."""
    last = _read_state(Path(directory)).get("last")
    if not isinstance(last, Mapping):
        return None
    try:
        return RefreshReport(
            str(last["at"]),
            tuple(
                SourceReport(
                    s["source"],
                    s["url"],
                    s["status"],
                    s["message"],
                    s["models"],
                    tuple(
                        Change(
                            c["model"],
                            None if c["before"] is None else tuple(c["before"]),
                            None if c["after"] is None else tuple(c["after"]),
                        )
                        for c in s["changes"]
                    ),
                )
                for s in last["sources"]
            ),
        )
    except (KeyError, TypeError):
        return None


_scheduled: dict[Path, float] = {}
_scheduled_lock = threading.Lock()


def schedule_refresh(
    store: CapabilityStore, *, clock: Callable[[], float] = _now
) -> threading.Thread | None:
    """Start a refresh in a daemon thread when one is due for ``store``'s cache directory.

    Due: the automatic refresh is on (:func:`refresh_enabled`), the store lives in a file,
    and the last attempt recorded there is older than :data:`REFRESH_EVERY` (checked at most
    once per :data:`REFRESH_EVERY` per process and directory, so building clients stays
    cheap). Returns the thread started, else ``None``. Never raises.
    """
    if store.path is None or not refresh_enabled():
        return None
    folder = store.path.parent / "catalogues"
    now = clock()
    with _scheduled_lock:
        if now - _scheduled.get(folder, -REFRESH_EVERY) < REFRESH_EVERY:
            return None
        _scheduled[folder] = now
    attempted = _read_state(folder).get("attempted")
    try:
        last = datetime.datetime.fromisoformat(str(attempted)).timestamp() if attempted else None
    except ValueError:
        last = None
    if last is not None and now - last < REFRESH_EVERY:
        return None

    def run() -> None:
        try:
            refresh(folder, clock=clock)
        except Exception as exc:  # a background refresh must never surface: one line
            _log.info("registry refresh failed: %s: %s", type(exc).__name__, exc)

    thread = threading.Thread(target=run, name="polythink-refresh", daemon=True)
    thread.start()
    return thread
