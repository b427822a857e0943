"""The user's capability store: what was learned on the wire or imported, kept across processes.

One store per file, shared by every client of the process that names the same file (so they
share what they learn), held in memory and written to one JSON file per user:

- ``$POLYTHINK_CAPABILITIES`` when set (a file path; ``off`` keeps the store in memory only);
- else ``$XDG_CACHE_HOME/polythink/capabilities.json``;
- else ``~/.cache/polythink/capabilities.json`` (next to the response cache directory).

``Client(capabilities_store=...)`` takes a path, ``False`` (memory only, this client alone) or
a :class:`CapabilityStore`. The file is private to the user (mode 0600 in a 0700 directory) and
holds model names, tiers, dates and the gist of provider error messages, never a key.

Lookup precedence (:meth:`CapabilityStore.lookup`): **observed** on the wire (this provider,
endpoint and model) > **documented** (the shipped registry, and entries registered in code) >
**imported** (a catalogue imported by hand, then the catalogues refreshed daily into the same
cache directory, :mod:`polythink.refresh`) > **inferred** (shipped entries whose evidence says
inferred, family rules).

An observation is scoped by the endpoint that answered (the source's base URL, normalised by
:func:`endpoint_scope`): it applies to later calls to that endpoint only, never to another
endpoint of the same provider, the provider's official one included. A gateway, a proxy, an
Azure deployment or the simulator may serve another model under the same name, or pass the
fields on differently, and a fact applied where it was not seen silently changes what every
later call sends; learning it again on another endpoint costs one rejected call there.
Entries written before observations were scoped (file format 1) have no endpoint: they load,
are listed by ``polythink models --learned`` as ``endpoint unknown``, apply to no call, and
are written back in format 2 unchanged until ``polythink models forget`` drops them.

Suspected stale entries: an observation that contradicts the registry (asked ``none`` and the
model reasoned; asked a tier and the provider reported 0 reasoning tokens) is counted; from
:data:`SUSPECT_AFTER` contradictions on it is listed by ``polythink models --learned``. It never
changes what is sent.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from polythink.catalogues import Catalogue, CatalogueEntry
from polythink.errors import InvalidInputError
from polythink.providers import ProviderProfile, get_provider
from polythink.reasoning.capabilities import (
    capabilities_from_openrouter,
    get_capability,
    normalise_model_name,
    openrouter_without_reasoning,
)
from polythink.reasoning.capability import Capability, capability_fields, capability_from_fields
from polythink.reasoning.ids import lookup_keys
from polythink.reasoning.learn import default_level, reasoning_levels
from polythink.reasoning.resolve import check_model_id, resolve
from polythink.reasoning.serving import serving
from polythink.types import Effort, Resolution

__all__ = [
    "ENV_VAR",
    "SUSPECT_AFTER",
    "CapabilityStore",
    "Known",
    "Levels",
    "Origin",
    "StoredEntry",
    "Suspicion",
    "default_store_path",
    "endpoint_scope",
    "open_store",
    "resolve_known",
]

ENV_VAR = "POLYTHINK_CAPABILITIES"
SUSPECT_AFTER = 3
"""Contradicting observations of one (provider, model, tier) before it is listed as suspect."""

Origin = Literal["observed", "documented", "imported", "inferred", "unknown"]
_FORMAT = 2
_READABLE_FORMATS = (1, 2)


@dataclass(frozen=True, slots=True)
class StoredEntry:
    """One learned or imported fact about a model.

    Attributes:
        origin: ``observed`` (learned from a provider's rejection) or ``imported``.
        provider: the provider id it was observed on; ``None`` for imported entries (they
            apply by model name on every provider, below the shipped registry).
        model: the model id as the source or the catalogue names it.
        capability: what the model accepts; ``None`` = it takes no reasoning parameter.
        evidence: where the fact comes from and when (provider, date, the error's gist; or
            the imported file and its date).
        date: ISO date (``YYYY-MM-DD``) it was recorded.
        endpoint: for an observation, the endpoint that answered (:func:`endpoint_scope`);
            it applies there only. ``None`` for imported entries, and for observations
            recorded before entries were scoped (they apply nowhere).
    """

    origin: Literal["observed", "imported"]
    provider: str | None
    model: str
    capability: Capability | None
    evidence: str
    date: str
    endpoint: str | None = None

    @property
    def key(self) -> tuple[str, str, str, str]:
        """(origin, provider or ``*``, endpoint or ``""``, normalised model name)."""
        return (
            self.origin,
            self.provider or "*",
            self.endpoint or "",
            normalise_model_name(self.model),
        )


@dataclass(frozen=True, slots=True)
class Suspicion:
    """Observations that contradict the registry for one (provider, model, tier).

    Attributes:
        provider, model: where it was seen.
        tier: the applied tier (``none`` or a strength).
        kind: ``reasoned_when_off`` (asked ``none``, reasoning observed) or
            ``silent_when_on`` (asked a tier, the provider reported 0 reasoning tokens).
        count: how many times.
        first_seen, last_seen: ISO dates.
        registry: the evidence of the entry being contradicted.
        endpoint: the endpoint that answered (:func:`endpoint_scope`); ``None`` when
            counted before contradictions were scoped.
    """

    provider: str
    model: str
    tier: str
    kind: Literal["reasoned_when_off", "silent_when_on"]
    count: int
    first_seen: str
    last_seen: str
    registry: str
    endpoint: str | None = None

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        """(provider, endpoint or ``""``, model, tier, kind)."""
        return (self.provider, self.endpoint or "", self.model, self.tier, self.kind)

    @property
    def suspected(self) -> bool:
        """Whether there were enough contradictions to list the entry as suspect."""
        return self.count >= SUSPECT_AFTER


@dataclass(frozen=True, slots=True)
class Known:
    """What polythink knows about a model on a provider, and from where.

    Attributes:
        capability: the capability to resolve with; ``None`` when unknown or when the model
            takes no reasoning parameter (see ``takes_parameter``).
        origin: ``observed``, ``documented``, ``imported``, ``inferred`` or ``unknown``.
        takes_parameter: ``False`` when the provider said the model takes no reasoning
            parameter.
        evidence: the evidence of the winning fact.
    """

    capability: Capability | None
    origin: Origin
    takes_parameter: bool = True
    evidence: str = ""


@dataclass(frozen=True, slots=True)
class Levels:
    """What a selector offers for one model (:func:`polythink.reasoning.reasoning_levels`).

    Attributes:
        levels: the tiers to offer, cheapest first (empty: no reasoning control).
        default: the tier to preselect (``None`` when nothing is offered).
        origin: where the knowledge comes from (``unknown`` = the generic tiers).
    """

    levels: tuple[Effort, ...]
    default: Effort | None
    origin: Origin


def _today() -> str:
    return datetime.datetime.now(datetime.UTC).date().isoformat()


def default_store_path() -> Path | None:
    """The per-user store file (see the module docstring); ``None`` when set to ``off``."""
    configured = os.environ.get(ENV_VAR)
    if configured is not None:
        return None if configured.strip().lower() in ("", "off") else Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "polythink" / "capabilities.json"


def endpoint_scope(url: str) -> str:
    """Return the scope of an observation made at ``url`` (a source's base URL).

    Scheme and host lowercased, the default port (80, 443) left out, user info, query and
    fragment dropped (never stored: they may hold credentials), the path without a
    trailing ``/``: ``HTTPS://API.OpenAI.com:443/v1/`` and ``https://api.openai.com/v1``
    are one endpoint.
    """
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is not None and (scheme, port) not in (("http", 80), ("https", 443)):
        host = f"{host}:{port}"
    return f"{scheme}://{host}{parts.path.rstrip('/')}"


def _scope(provider: str | None, endpoint: str | None) -> str | None:
    """The endpoint scope a lookup or an observation means: ``endpoint``, else the
    provider's default base URL, else ``None`` (each provider's own default)."""
    if endpoint is not None:
        return endpoint_scope(endpoint)
    if provider is not None:
        return endpoint_scope(get_provider(provider).base_url)
    return None


def _shipped_origin(cap: Capability) -> Origin:
    return "inferred" if cap.evidence.lower().startswith("inferred") else "documented"


class CapabilityStore:
    """Learned and imported capabilities in memory, persisted to one JSON file.

    Args:
        path: the JSON file; ``None`` = memory only. A missing file is an empty store; a
            file that cannot be read is reported once as a ``ValueError``.
        today: the date function (ISO ``YYYY-MM-DD``), injectable for tests.

    Raises:
        ValueError: when ``path`` exists but is not a store file polythink wrote.
    """

    def __init__(
        self, path: str | Path | None = None, *, today: Callable[[], str] = _today
    ) -> None:
        self.path = Path(path).expanduser() if path is not None else None
        self._today = today
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str, str, str], StoredEntry] = {}
        self._suspicions: dict[tuple[str, str, str, str, str], Suspicion] = {}
        if self.path is not None and self.path.exists():
            self._entries, self._suspicions = _read(self.path)
        self.catalogue: Catalogue | None = (
            Catalogue(self.path.parent / "catalogues") if self.path is not None else None
        )
        """The refreshed catalogues next to the store file (:mod:`polythink.catalogues`),
        ranked as imported after the catalogues imported by hand; ``None`` in memory."""

    def today(self) -> str:
        """Today's date as the store records it (ISO ``YYYY-MM-DD``, UTC)."""
        return self._today()

    # -- lookups ---------------------------------------------------------------------------

    def lookup(self, provider: str | None, model: str, endpoint: str | None = None) -> Known:
        """Return the winning fact for ``model`` on ``provider`` (precedence in the module doc).

        An observation counts for the model's identity
        (:func:`~polythink.reasoning.normalise_model_name`); the registry and imported entries
        are looked up by every form of the id, most specific first
        (:func:`polythink.reasoning.ids.lookup_keys`), so a Bedrock, Vertex or fine-tuned id
        finds what is known of its base model. Only an observation made at ``endpoint`` (a base
        URL; ``None``: the provider's default one) counts. ``provider`` ``None`` takes an
        observation made on any provider at ``endpoint``, or, without one, at that provider's
        own default endpoint.

        Raises:
            ValueError: an empty model id.
        """
        check_model_id(model)
        name = normalise_model_name(model)
        if provider is None:
            scope = _scope(None, endpoint)
            observed = next(
                (
                    e
                    for k, e in self._entries.items()
                    if k[0] == "observed"
                    and k[3] == name
                    and e.endpoint is not None
                    and e.endpoint == (scope or _scope(e.provider, None))
                ),
                None,
            )
        else:
            observed = self._entries.get(
                ("observed", provider, _scope(provider, endpoint) or "", name)
            )
        if observed is not None:
            return Known(
                observed.capability, "observed", observed.capability is not None, observed.evidence
            )
        shipped = get_capability(model, provider)
        if shipped is not None and _shipped_origin(shipped) == "documented":
            return Known(shipped, "documented", evidence=shipped.evidence)
        keys = lookup_keys(provider, model)
        imported: StoredEntry | CatalogueEntry | None = next(
            (
                found
                for key in ((name, *keys) if keys else ())
                if (found := self._entries.get(("imported", "*", "", key))) is not None
            ),
            None,
        )
        if imported is None and keys and self.catalogue is not None:
            imported = self.catalogue.find(provider, model)
        if imported is not None:
            return Known(
                imported.capability,
                "imported",
                imported.capability is not None,
                imported.evidence,
            )
        if shipped is not None:
            return Known(shipped, "inferred", evidence=shipped.evidence)
        return Known(None, "unknown")

    def levels(
        self, model: str, provider: str | None = None, endpoint: str | None = None
    ) -> Levels:
        """Return the tiers a selector should offer for ``model`` and the one to preselect
        (at ``endpoint``, as :meth:`lookup`)."""
        known = self.lookup(provider, model, endpoint)
        capability, takes = known.capability, known.takes_parameter
        return Levels(
            reasoning_levels(capability, takes_parameter=takes),
            default_level(capability, takes_parameter=takes),
            known.origin,
        )

    def resolve(
        self,
        effort: Effort | str | bool | None,
        *,
        provider: str | ProviderProfile,
        model: str,
        policy: str = "nearest",
        max_tokens: int | None = None,
        endpoint: str | None = None,
        base_model: str | None = None,
        tools: bool = False,
    ) -> Resolution:
        """Resolve ``effort`` for ``model`` on ``provider`` as a client with this store would.

        The capability comes from :meth:`lookup` at ``endpoint`` (the source's base URL;
        ``None``: the provider's default) with observed > documented > imported >
        inferred, for the model and on the profile the client's source would use
        (:func:`polythink.reasoning.serving.serving`), then :func:`resolve_known` builds the
        fragment. Other args and errors as :func:`polythink.reasoning.resolve`.

        Raises:
            ValueError: an unknown effort string, policy or provider id.
            ThinkingUnsupportedError: the tier cannot be satisfied (for example ``none`` on a
                model the store knows cannot switch reasoning off).
        """
        served = serving(provider, model, base_model)
        known = self.lookup(served.lookup_provider, served.model, endpoint)
        return resolve_known(
            effort,
            provider=served.profile,
            model=model,
            base_model=base_model,
            known=known,
            policy=policy,
            max_tokens=max_tokens,
            tools=tools,
        )

    def import_openrouter(self, path: str | Path) -> int:
        """Read an OpenRouter ``/api/v1/models`` JSON file into the store as *imported*.

        The evidence names the file and its modification date. See
        :func:`polythink.reasoning.capabilities_from_openrouter` for the fields read. A model
        whose ``supported_parameters`` list lacks ``reasoning`` (and that has no ``reasoning``
        object) is stored as taking no reasoning parameter
        (:func:`polythink.reasoning.openrouter_without_reasoning`); the shipped registry
        still wins over it (precedence above).

        Returns:
            how many models were imported.

        Raises:
            ValueError: when the file cannot be read or is not such a document.
        """
        source = Path(path).expanduser()
        try:
            document = json.loads(source.read_text(encoding="utf-8"))
            stamp = datetime.datetime.fromtimestamp(source.stat().st_mtime, datetime.UTC)
        except (OSError, ValueError) as exc:
            raise InvalidInputError(f"cannot read OpenRouter models file {source}: {exc}") from exc
        evidence = (
            f"imported: OpenRouter /models document {source.name} "
            f"(file dated {stamp.date().isoformat()})"
        )
        count = self.add_imported(
            capabilities_from_openrouter(document, evidence=evidence), evidence
        )
        return count + self.add_imported_without_reasoning(
            openrouter_without_reasoning(document), evidence
        )

    def entries(self, origin: str | None = None) -> list[StoredEntry]:
        """Every stored entry (optionally of one origin), sorted by model, provider and
        endpoint."""
        with self._lock:
            found = [e for e in self._entries.values() if origin is None or e.origin == origin]
        return sorted(found, key=lambda e: (e.model, e.provider or "", e.endpoint or ""))

    def suspicions(self, *, all_counts: bool = False) -> list[Suspicion]:
        """Suspected stale registry entries (or every counted contradiction)."""
        with self._lock:
            found = [s for s in self._suspicions.values() if all_counts or s.suspected]
        return sorted(found, key=lambda s: (s.model, s.provider, s.endpoint or "", s.tier))

    # -- changes ---------------------------------------------------------------------------

    def observe(
        self,
        provider: str,
        model: str,
        capability: Capability | None,
        evidence: str,
        endpoint: str | None = None,
    ) -> StoredEntry:
        """Record what a provider's answer showed about a model, and persist it.

        ``capability`` ``None`` records that the model takes no reasoning parameter.
        ``endpoint`` is the base URL that answered (``None``: the provider's default); the
        entry applies to calls to that endpoint only.
        """
        entry = StoredEntry(
            "observed",
            provider,
            model,
            capability,
            evidence,
            self.today(),
            _scope(provider, endpoint),
        )
        self._put([entry])
        return entry

    def add_imported(self, capabilities: Iterable[Capability], evidence: str) -> int:
        """Store imported capabilities (replacing earlier imports of the same models).

        Returns:
            how many entries were stored.
        """
        date = self.today()
        entries = [
            StoredEntry(
                "imported", None, cap.model, replace(cap, evidence=evidence), evidence, date
            )
            for cap in capabilities
        ]
        self._put(entries)
        return len(entries)

    def add_imported_without_reasoning(self, models: Iterable[str], evidence: str) -> int:
        """Store imported models that take no reasoning parameter (no reasoning control).

        Returns:
            how many entries were stored.
        """
        date = self.today()
        entries = [StoredEntry("imported", None, model, None, evidence, date) for model in models]
        self._put(entries)
        return len(entries)

    def forget(self, model: str, provider: str | None = None) -> int:
        """Drop the learned and imported entries and suspicions of ``model``.

        Args:
            model: matched by normalised name (``openai/gpt-5.1`` forgets ``gpt-5.1`` too).
            provider: only those observed on this provider (imported ones stay).

        Returns:
            how many entries and suspicions were dropped.
        """
        name = normalise_model_name(model)
        with self._lock:
            keys = [
                k
                for k, e in self._entries.items()
                if k[3] == name and (provider is None or e.provider == provider)
            ]
            hints = [
                k
                for k, s in self._suspicions.items()
                if normalise_model_name(s.model) == name
                and (provider is None or s.provider == provider)
            ]
            for key in keys:
                del self._entries[key]
            for hint in hints:
                del self._suspicions[hint]
            dropped = len(keys) + len(hints)
            if dropped:
                self._save_locked(removed=set(keys), removed_hints=set(hints))
        return dropped

    def contradict(
        self,
        provider: str,
        model: str,
        tier: Effort,
        kind: Literal["reasoned_when_off", "silent_when_on"],
        registry: str,
        endpoint: str | None = None,
    ) -> Suspicion:
        """Count one observation contradicting the registry at ``endpoint`` (``None``: the
        provider's default); return the updated count.

        Persisted while the count is at most :data:`SUSPECT_AFTER` (later ones only in memory:
        the entry is listed already).
        """
        scope = _scope(provider, endpoint)
        key = (provider, scope or "", model, tier.value, kind)
        today = self.today()
        with self._lock:
            previous = self._suspicions.get(key)
            if previous is None:
                found = Suspicion(
                    provider, model, tier.value, kind, 1, today, today, registry, scope
                )
            else:
                found = replace(previous, count=previous.count + 1, last_seen=today)
            self._suspicions[key] = found
            if found.count <= SUSPECT_AFTER:
                self._save_locked()
        return found

    def _put(self, entries: list[StoredEntry]) -> None:
        with self._lock:
            for entry in entries:
                self._entries[entry.key] = entry
            self._save_locked()

    def _save_locked(
        self,
        removed: set[tuple[str, str, str, str]] | None = None,
        removed_hints: set[tuple[str, str, str, str, str]] | None = None,
    ) -> None:
        if self.path is None:
            return
        # Another process may have written since this one loaded: keep its entries unless this
        # process has its own for the same key (then this one, the newer, wins).
        entries, hints = _read(self.path) if self.path.exists() else ({}, {})
        for key in removed or ():
            entries.pop(key, None)
        for hint in removed_hints or ():
            hints.pop(hint, None)
        entries.update(self._entries)
        hints.update(self._suspicions)
        self._entries, self._suspicions = entries, hints
        _write(self.path, entries, hints)


def resolve_known(
    effort: Effort | str | bool | None,
    *,
    provider: str | ProviderProfile,
    model: str,
    known: Known,
    policy: str = "nearest",
    max_tokens: int | None = None,
    base_model: str | None = None,
    tools: bool = False,
) -> Resolution:
    """Resolve ``effort`` with what is ``known`` about the model (one :meth:`lookup` result).

    A model known to take no reasoning parameter gets an empty fragment, the applied tier
    ``None`` and a warning naming the evidence's origin; otherwise
    :func:`polythink.reasoning.resolve` runs with ``known.capability`` (``None`` = an
    unregistered model: the fragment is built unchecked, with a warning). The reasoning
    middleware, :meth:`CapabilityStore.resolve` and ``polythink resolve`` all go through here.

    Raises:
        ValueError: an unknown effort string, policy or provider id.
        ThinkingUnsupportedError: as :func:`polythink.reasoning.resolve`.
    """
    requested = Effort.parse(effort)
    if not known.takes_parameter and requested is not None:
        served = serving(provider, model, base_model)
        note = (
            f"model {served.model!r} takes no reasoning parameter on {served.profile.id} "
            f"({known.origin} evidence); sent none for reasoning_effort={requested.value!r}, "
            "so the model reasons (or not) by its own default"
        )
        return Resolution(requested, None, {}, None, (note,))
    return resolve(
        requested,
        provider=provider,
        model=model,
        policy=policy,
        max_tokens=max_tokens,
        capability=known.capability,
        base_model=base_model,
        tools=tools,
    )


def _cap_json(cap: Capability | None) -> dict[str, Any] | None:
    return None if cap is None else capability_fields(cap)


def _cap_from(model: str, row: Mapping[str, Any] | None, evidence: str) -> Capability | None:
    return None if row is None else capability_from_fields(model, row, evidence=evidence)


_Entries = dict[tuple[str, str, str, str], StoredEntry]
_Hints = dict[tuple[str, str, str, str, str], Suspicion]


def _read(path: Path) -> tuple[_Entries, _Hints]:
    """Read a store file of format 2, or of format 1 (written before observations were
    scoped by endpoint: its entries and suspicions load with no endpoint)."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(document, Mapping) or document.get("format") not in _READABLE_FORMATS:
            raise InvalidInputError(
                f"'format' is not one of {', '.join(map(str, _READABLE_FORMATS))}"
            )
        entries: _Entries = {}
        for row in document.get("entries", []):
            entry = StoredEntry(
                origin=row["origin"],
                provider=row.get("provider"),
                model=row["model"],
                capability=_cap_from(row["model"], row.get("capability"), row["evidence"]),
                evidence=row["evidence"],
                date=row["date"],
                endpoint=row.get("endpoint"),
            )
            entries[entry.key] = entry
        hints: _Hints = {}
        for row in document.get("suspicions", []):
            hint = Suspicion(**row)
            hints[hint.key] = hint
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InvalidInputError(
            f"capability store {path} cannot be read ({exc}); remove it or point "
            f"{ENV_VAR} (or Client(capabilities_store=...)) elsewhere"
        ) from exc
    return entries, hints


def _write(path: Path, entries: _Entries, hints: _Hints) -> None:
    document = {
        "format": _FORMAT,
        "entries": [
            {
                "origin": e.origin,
                "provider": e.provider,
                "endpoint": e.endpoint,
                "model": e.model,
                "capability": _cap_json(e.capability),
                "evidence": e.evidence,
                "date": e.date,
            }
            for e in sorted(entries.values(), key=lambda e: e.key)
        ],
        "suspicions": [
            {
                "provider": s.provider,
                "endpoint": s.endpoint,
                "model": s.model,
                "tier": s.tier,
                "kind": s.kind,
                "count": s.count,
                "first_seen": s.first_seen,
                "last_seen": s.last_seen,
                "registry": s.registry,
            }
            for s in sorted(hints.values(), key=lambda s: s.key)
        ],
    }
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(document, handle, ensure_ascii=False, indent=1)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise


_shared: dict[Path | None, CapabilityStore] = {}
_shared_lock = threading.Lock()


def open_store(where: str | Path | bool | CapabilityStore | None = None) -> CapabilityStore:
    """Return the store a client should use.

    Args:
        where: ``None`` or ``True``: the per-user store (:func:`default_store_path`), one
            instance per process; a path: the store in that file, one instance per process
            and file; ``False``: a new memory-only store; a :class:`CapabilityStore`: itself.

    Raises:
        ValueError: for another type, or a file that is not a store.
    """
    if isinstance(where, CapabilityStore):
        return where
    if where is False:
        return CapabilityStore(None)
    if where is None or where is True:
        path = default_store_path()
    elif isinstance(where, str | Path):
        path = Path(where).expanduser()
    else:
        raise InvalidInputError(
            "capabilities_store must be None (the per-user file), a file path, False (memory "
            f"only) or a CapabilityStore; got {type(where).__name__}"
        )
    key = path.resolve() if path is not None else None
    with _shared_lock:
        store = _shared.get(key)
        if store is None:
            store = CapabilityStore(path)
            _shared[key] = store
    return store
