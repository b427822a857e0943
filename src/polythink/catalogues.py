"""The refreshed catalogues: maintained model catalogues kept in the user's cache directory.

:mod:`polythink.refresh` fetches LiteLLM's model map and OpenRouter's ``/models`` at most once a
day and writes what they say about reasoning into one file next to the capability store
(``catalogues/catalogues.json``; the store is ``capabilities.json`` in the same cache
directory). This module reads that file for lookups: the capability store ranks its entries
as *imported* (observed > documented > imported > inferred), after the catalogues imported by
hand. The shipped registry stays the offline fallback: without the file nothing changes.

The file is read on the first lookup that reaches it, and again when a refresh rewrote it
(its modification time changed). It holds model ids, tiers, dates and where they came from,
never a key.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polythink.reasoning.capabilities import normalise_model_name
from polythink.reasoning.capability import Capability, capability_fields, capability_from_fields
from polythink.reasoning.ids import lookup_keys

__all__ = [
    "CATALOGUE_FILE",
    "CATALOGUE_SOURCES",
    "Catalogue",
    "CatalogueEntry",
    "write_catalogue",
]

CATALOGUE_FILE = "catalogues.json"
CATALOGUE_SOURCES = ("litellm", "openrouter")
"""The refreshed catalogues, the one that wins first: LiteLLM's map says what each provider's
own API takes; OpenRouter's ``/models`` what its gateway takes."""

_FORMAT = 1


@dataclass(frozen=True, slots=True)
class CatalogueEntry:
    """What one refreshed catalogue says about one model.

    Attributes:
        source: ``litellm`` or ``openrouter``.
        model: the model id as the catalogue names it.
        capability: what the model accepts; ``None`` = it takes no reasoning parameter.
        evidence: the catalogue, where it was fetched from, and when.
    """

    source: str
    model: str
    capability: Capability | None
    evidence: str


class Catalogue:
    """The refreshed catalogues of one cache directory, read lazily.

    Args:
        directory: the ``catalogues`` directory (it may not exist yet).
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.path = self.directory / CATALOGUE_FILE
        self._lock = threading.Lock()
        self._stamp: float | None = None
        self._index: dict[str, CatalogueEntry] = {}
        self._sources: dict[str, Any] = {}

    def _load(self) -> None:
        try:
            stamp = self.path.stat().st_mtime
        except OSError:
            stamp = None
        if stamp == self._stamp:
            return
        with self._lock:
            entries, sources = read_catalogue(self.path) if stamp is not None else ([], {})
            index: dict[str, CatalogueEntry] = {}
            # The later source loses: index the sources in reverse order of precedence.
            rank = {name: i for i, name in enumerate(CATALOGUE_SOURCES)}
            for entry in sorted(entries, key=lambda e: -rank.get(e.source, len(rank))):
                index[normalise_model_name(entry.model)] = entry
            self._index, self._sources, self._stamp = index, sources, stamp

    def find(self, provider: str | None, model: str) -> CatalogueEntry | None:
        """The entry for ``model`` (its identity, then every lookup form, most specific
        first), or ``None``."""
        self._load()
        if not self._index:
            return None
        for key in (normalise_model_name(model), *lookup_keys(provider, model)):
            found = self._index.get(key)
            if found is not None:
                return found
        return None

    def entries(self, source: str | None = None) -> list[CatalogueEntry]:
        """Every entry (of one source), in the order the file holds them."""
        self._load()
        return [e for e in self._index.values() if source is None or e.source == source]

    def sources(self) -> dict[str, Any]:
        """Per source: where it was fetched from, when, and how many models it gave."""
        self._load()
        return dict(self._sources)


def read_catalogue(path: Path) -> tuple[list[CatalogueEntry], dict[str, Any]]:
    """Read a catalogue file; an unreadable one counts as empty (a refresh rewrites it)."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(document, Mapping) or document.get("format") != _FORMAT:
            return [], {}
        entries = []
        for row in document.get("entries", []):
            cap = row.get("capability")
            entries.append(
                CatalogueEntry(
                    source=row["source"],
                    model=row["model"],
                    capability=None
                    if cap is None
                    else capability_from_fields(row["model"], cap, evidence=row["evidence"]),
                    evidence=row["evidence"],
                )
            )
        return entries, dict(document.get("sources", {}))
    except (OSError, ValueError, KeyError, TypeError):
        return [], {}


def write_catalogue(
    path: Path, entries: Iterable[CatalogueEntry], sources: Mapping[str, Any]
) -> None:
    """Write a catalogue file atomically, private to the user (0600 in a 0700 directory)."""
    document = {
        "format": _FORMAT,
        "sources": dict(sources),
        "entries": [
            {
                "source": e.source,
                "model": e.model,
                "capability": None if e.capability is None else capability_fields(e.capability),
                "evidence": e.evidence,
            }
            for e in entries
        ],
    }
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(document, handle, ensure_ascii=False, separators=(",", ":"))
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
