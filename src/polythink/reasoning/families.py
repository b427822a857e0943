"""Family rules: what a model the registry does not list accepts, by its family's documented rules.

Providers ship a model a week, and a new one usually follows the rules its family documents:
a new ``claude-fable-5-x`` always thinks and takes ``low``…``max`` like Fable 5.1 and 5.2, a
new ``gemini-4-*`` takes ``thinkingLevel`` and never ``thinkingBudget``, a Gemini 2.5 variant
takes ``thinkingBudget`` and never ``thinkingLevel``. ``families.toml`` next to this module
holds one ``[[family]]`` table per family: ``name``, ``match`` (a regular expression searched
in the model's lookup forms, see :func:`polythink.reasoning.ids.lookup_keys`: the id read back
to the model it names, lower case, ``.`` read as ``-``, tried from the most specific form —
the dated id — to the base model), the capability fields every member shares, and the
evidence for them. For each form in turn, the first family that matches wins, so the file
lists the specific families before the general ones.

A capability inferred here carries the evidence ``inferred from family <name>: …``; the
capability store ranks it below imported and documented facts, and a provider's rejection
still teaches the store what the model really accepts (:mod:`polythink.reasoning.learn`).
The file is read once, on the first lookup of a model the registry does not list. Pure: no
I/O beyond reading the packaged data.
"""

from __future__ import annotations

import re
import threading
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from polythink.reasoning.capability import Capability, capability_from_fields
from polythink.reasoning.ids import lookup_keys

__all__ = ["Family", "all_families", "family_capability", "family_of"]


@dataclass(frozen=True, slots=True)
class Family:
    """One family of models and the rules its members share.

    Attributes:
        name: how evidence and listings name the family (``"Claude Fable/Mythos 5.1+"``).
        pattern: compiled from ``match``; searched in the normalised model name.
        fields: the capability fields every member shares (as in ``capabilities.toml``).
        evidence: where the family's rules come from, and when.
    """

    name: str
    pattern: re.Pattern[str]
    fields: Mapping[str, Any]
    evidence: str

    def capability(self, model: str) -> Capability:
        """The capability this family gives ``model``."""
        return capability_from_fields(
            model, self.fields, evidence=f"inferred from family {self.name}: {self.evidence}"
        )


_lock = threading.Lock()
_families: tuple[Family, ...] | None = None
_inferred: dict[tuple[str | None, str], Capability | None] = {}
_MEMO_LIMIT = 1024


def _load() -> tuple[Family, ...]:
    global _families
    if _families is not None:
        return _families
    with _lock:
        if _families is None:
            data = resources.files("polythink.reasoning").joinpath("families.toml")
            parsed = tomllib.loads(data.read_text(encoding="utf-8"))
            loaded = []
            for row in parsed.get("family", []):
                fields = {k: v for k, v in row.items() if k not in ("name", "match", "evidence")}
                family = Family(
                    name=row["name"],
                    pattern=re.compile(row["match"]),
                    fields=fields,
                    evidence=row["evidence"],
                )
                # A malformed family fails here, at load, not on some later lookup.
                family.capability(f"{family.name} (check)")
                loaded.append(family)
            _families = tuple(loaded)
    return _families


def all_families() -> tuple[Family, ...]:
    """Every family, in matching order."""
    return _load()


def family_of(model: str, provider: str | None = None) -> Family | None:
    """The family of ``model`` (on ``provider``; ``None`` reads the id by its shape): for each
    lookup form, most specific first, the first family whose pattern matches; ``None`` when
    none does or the id does not name its model (an Azure deployment name)."""
    families = _load()
    for key in lookup_keys(provider, model):
        for family in families:
            if family.pattern.search(key):
                return family
    return None


def family_capability(model: str, provider: str | None = None) -> Capability | None:
    """The capability ``model`` gets from its family (see the module docstring), or ``None``
    when it belongs to no known family. Memoised per (provider, model)."""
    memo = (provider, model)
    if memo in _inferred:
        return _inferred[memo]
    family = family_of(model, provider)
    found = family.capability(model) if family is not None else None
    with _lock:
        if len(_inferred) >= _MEMO_LIMIT:
            _inferred.clear()
        _inferred[memo] = found
    return found
