"""The per-model capability registry: which reasoning tiers each model accepts.

Capabilities are per model, not per provider: the same provider changes its accepted tiers
with almost every model generation. The shipped data lives in ``capabilities.toml`` next to
this module, one entry per model with its evidence (source, date, and whether documented,
measured or inferred). It is read once, on the first lookup, so ``import polythink`` stays
cheap.

Lookup order: the exact name, then a registered alias, then the lookup forms of
:func:`polythink.reasoning.ids.lookup_keys`, most specific first: the id read back to the
model it names (Bedrock, Vertex, ARN, fine-tune, gateway and Ollama forms), then without its
snapshot (``-2025-08-07``, ``-0309``, ``-latest`` …), then without variant suffixes that share
the model's rules (``-highspeed`` …); each compared in lower case with ``.`` read as ``-``
against the names and aliases of every entry. An entry is found by its own name, never by a
shorter one: ``mistral-small-latest`` is not what ``mistral-small-2506`` names.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from polythink.errors import InvalidInputError
from polythink.reasoning.capability import (
    PER_CALL_INSTRUCTIONS,
    Capability,
    capability_fields,
    capability_from_fields,
)
from polythink.reasoning.ids import model_key, parse_model_id
from polythink.types import EFFORT_ORDER, Effort

__all__ = [
    "PER_CALL_INSTRUCTIONS",
    "Capability",
    "all_capabilities",
    "capabilities_from_openrouter",
    "capability_fields",
    "capability_from_fields",
    "get_capability",
    "normalise_model_name",
    "register_capability",
    "shipped_capability",
]

_lock = threading.Lock()
_entries: dict[str, Capability] | None = None
_index: dict[str, Capability] = {}


def normalise_model_name(name: str, provider: str | None = None) -> str:
    """Return the identity of the model ``name`` names, as stores and listings key it.

    The id read back to its native model (:func:`polythink.reasoning.ids.parse_model_id`:
    provider, cloud and gateway wrappers off, an OpenRouter catalog variant such as
    ``:thinking`` kept), a full date suffix (``-2025-08-07``, ``-20250929``, ``@20250929``)
    removed, lower case, ``.`` read as ``-``. Short dates and ``-latest`` stay: they may name
    another generation of the model.

    >>> normalise_model_name("anthropic/claude-opus-5.5")
    'claude-opus-5-5'
    >>> normalise_model_name("gpt-5-2025-08-07")
    'gpt-5'
    >>> normalise_model_name("us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    'claude-sonnet-4-5'
    """
    return parse_model_id(provider, name).key


def _load() -> dict[str, Capability]:
    global _entries
    if _entries is not None:
        return _entries
    with _lock:
        if _entries is None:
            import tomllib  # with the table, not with import polythink
            from importlib import resources

            data = resources.files("polythink.reasoning").joinpath("capabilities.toml")
            parsed = tomllib.loads(data.read_text(encoding="utf-8"))
            loaded: dict[str, Capability] = {}
            for row in parsed.get("model", []):
                cap = _from_row(row)
                loaded[cap.model] = cap
            for cap in loaded.values():
                _index_entry(cap)
            _entries = loaded
    return _entries


def _from_row(row: Mapping[str, Any]) -> Capability:
    try:
        return capability_from_fields(row["name"], row)
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInputError(f"capabilities.toml: entry {row.get('name')!r}: {exc}") from exc


def _entry_keys(name: str) -> tuple[str, ...]:
    """The index keys of an entry's name or alias: the name itself, its lookup form, and the
    most specific lookup form of the model it names (a catalogue's ``anthropic/x:thinking``
    is found as ``x:thinking``) — never a shorter form."""
    keys = parse_model_id(None, name).keys
    return (name, model_key(name), *keys[:1])


def _index_entry(cap: Capability) -> None:
    for name in (cap.model, *cap.aliases):
        for key in _entry_keys(name):
            _index[key] = cap


def shipped_capability(model: str, provider: str | None = None) -> Capability | None:
    """Look a model up in the registry itself (shipped and registered entries, no family
    rules); ``None`` when it has no entry or the id does not name its model (an Azure
    deployment name). Lookup order as :func:`get_capability`."""
    entries = _load()
    parsed = parse_model_id(provider, model)
    if not parsed.inferable:
        return None
    found = entries.get(model) or _index.get(model)
    if found is not None:
        return found
    for key in parsed.keys:
        found = _index.get(key)
        if found is not None:
            return found
    return None


def get_capability(model: str, provider: str | None = None) -> Capability | None:
    """Look a model up in the registry, else infer it from its family; ``None`` when neither
    knows it.

    Tries the exact name, then the lookup forms of the model the id names
    (:func:`polythink.reasoning.ids.lookup_keys`: ``us.anthropic.claude-sonnet-4-5-…-v1:0``,
    ``claude-sonnet-4-5@20250929`` and ``anthropic/claude-sonnet-4.5`` all find
    ``claude-sonnet-4-5``), then the family rules
    (:func:`polythink.reasoning.families.family_capability`: a new id of a known family, such
    as a ``claude-fable-5-3``, gets that family's documented rules with evidence ``inferred
    from family …``). A model neither knows is not an error: resolution injects by the
    provider's wire and warns once.

    Args:
        model: the model id as configured.
        provider: the provider id it is sent to, where the id's form depends on it (an
            Ollama tag, an OpenRouter variant, an Azure deployment name, which names no
            model); ``None`` reads the id by its shape.
    """
    found = shipped_capability(model, provider)
    if found is not None:
        return found
    from polythink.reasoning.families import family_capability

    return family_capability(model, provider)


def register_capability(capability: Capability) -> Capability:
    """Add or replace the registry entry for ``capability.model`` (and its aliases).

    Returns the capability, so the call can wrap a constructor. Registration is
    process-wide; a registered entry wins over the shipped one of the same name.
    """
    entries = _load()
    with _lock:
        previous = entries.get(capability.model)
        if previous is not None:
            for name in (previous.model, *previous.aliases):
                for key in _entry_keys(name):
                    if _index.get(key) is previous:
                        del _index[key]
        entries[capability.model] = capability
        _index_entry(capability)
    return capability


def all_capabilities(provider: str | None = None) -> list[Capability]:
    """Return every registered capability, optionally only those of one provider id."""
    entries = _load()
    return [c for c in entries.values() if provider is None or c.provider == provider]


def _known_effort(value: Any) -> Effort | None:
    # The gateway adds tiers over time; one polythink does not know must not make the
    # whole /models document unreadable, so it is left out rather than raised.
    try:
        return Effort.parse(value) if isinstance(value, str) else None
    except ValueError:
        return None


def capabilities_from_openrouter(
    document: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    *,
    evidence: str = "documented: OpenRouter /models reasoning metadata",
) -> list[Capability]:
    """Build capabilities from an OpenRouter ``/api/v1/models`` JSON document.

    Reads each model's ``reasoning`` object (OR-DOC, retrieved 2026-10-05):
    ``supported_efforts`` (listed highest first; ``null`` = no allowlist, every gateway tier;
    omitted = no effort selection, on/off only), ``mandatory`` (true = cannot switch off),
    ``default_effort`` (``"none"`` = off by default); the model's ``context_length`` becomes
    ``context_window``. The tiers come out cheapest first, with ``none`` first unless
    ``mandatory``. Models without a ``reasoning`` object are skipped (they do not reason, or
    are routers; :func:`openrouter_without_reasoning` lists those whose
    ``supported_parameters`` show no reasoning control); tier names polythink does not know
    are left out. Pass the result to :func:`register_capability`, or store it as imported with
    :meth:`polythink.capability_store.CapabilityStore.import_openrouter`.

    Args:
        document: the parsed JSON document.
        evidence: the evidence text of every capability built (name the file and its date).

    Raises:
        ValueError: when the document is neither ``{"data": [...]}`` nor a list of models.
    """
    result: list[Capability] = []
    for model in _openrouter_models(document):
        reasoning = model.get("reasoning")
        if not isinstance(reasoning, Mapping) or not model.get("id"):
            continue
        mandatory = bool(reasoning.get("mandatory"))
        if "supported_efforts" not in reasoning:
            efforts: list[Effort] = [Effort.AUTO]
        elif reasoning["supported_efforts"] is None:
            efforts = [e for e in EFFORT_ORDER if e is not Effort.NONE]
        else:
            efforts = [
                e
                for e in (_known_effort(v) for v in reasoning["supported_efforts"])
                if e is not None and e is not Effort.NONE
            ]
            if not efforts:
                efforts = [Effort.AUTO]
        if not mandatory:
            efforts.insert(0, Effort.NONE)
        default = reasoning.get("default_effort")
        window = model.get("context_length")
        result.append(
            Capability(
                model=str(model["id"]),
                supported_efforts=tuple(efforts),
                default_effort=_known_effort(default),
                provider="openrouter",
                evidence=evidence,
                context_window=window if type(window) is int and window > 0 else None,
            )
        )
    return result


def openrouter_without_reasoning(
    document: Mapping[str, Any] | Sequence[Mapping[str, Any]],
) -> list[str]:
    """Return the ids of the models an OpenRouter ``/api/v1/models`` document shows take no
    reasoning parameter: a ``supported_parameters`` list without ``"reasoning"`` and no
    ``reasoning`` object (OR-DOC, retrieved 2026-10-05: ``supported_parameters`` lists the
    request parameters the model's providers accept). A model without a
    ``supported_parameters`` list is left out (nothing is known about it).

    Raises:
        ValueError: when the document is neither ``{"data": [...]}`` nor a list of models.
    """
    result: list[str] = []
    for model in _openrouter_models(document):
        parameters = model.get("supported_parameters")
        if not isinstance(parameters, list) or not model.get("id"):
            continue
        if "reasoning" in parameters or isinstance(model.get("reasoning"), Mapping):
            continue
        result.append(str(model["id"]))
    return result


def _openrouter_models(
    document: Mapping[str, Any] | Sequence[Mapping[str, Any]],
) -> Iterable[Mapping[str, Any]]:
    if isinstance(document, Mapping):
        data = document.get("data")
        if not isinstance(data, list):
            raise InvalidInputError("an OpenRouter /models document has a 'data' list of models")
        return data
    return document
