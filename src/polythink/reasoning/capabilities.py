"""The per-model capability registry: which reasoning tiers each model accepts.

Capabilities are per model, not per provider: the same provider changes its accepted tiers
with almost every model generation. The shipped data lives in ``capabilities.toml`` next to
this module, one entry per model with its evidence (source, date, and whether documented,
measured or inferred). It is read once, on the first lookup, so ``import polythink`` stays
cheap.

Lookup order: the exact name, then a registered alias, then the *normalised* name
(lower-cased; a provider prefix such as ``openai/`` or ``anthropic/`` removed; a date
suffix such as ``-2025-08-07``, ``-20250929`` or ``@20250929`` removed; ``.`` read as
``-``), compared with the normalised names and aliases of every entry.
"""

from __future__ import annotations

import re
import threading
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from polythink.types import EFFORT_ORDER, Effort

__all__ = [
    "Capability",
    "all_capabilities",
    "capabilities_from_openrouter",
    "get_capability",
    "normalise_model_name",
    "register_capability",
]

_THINKING_STYLES = frozenset({"manual", "adaptive", "budget", "level"})


@dataclass(frozen=True, slots=True)
class Capability:
    """What one model accepts for reasoning.

    Attributes:
        model: the model id.
        supported_efforts: accepted tiers, cheapest first. ``none`` present means reasoning
            can be switched off; ``(none,)`` alone means the model does not reason; ``auto``
            means reasoning can be switched on but has no strength tiers (or is always on
            with no control).
        default_effort: what the model does when no reasoning field is sent (``none`` = no
            reasoning, ``auto`` = reasons at a strength of its own); ``None`` = not known.
        provider: the provider id whose native API documents the model.
        thinking: native request style where a provider has several (Anthropic ``manual`` or
            ``adaptive``; Gemini and Qwen ``budget``, Gemini 3 ``level``); ``None`` otherwise.
        budget_min, budget_max: reasoning budget range in tokens for budget styles.
        max_output_tokens: the model's output ceiling in tokens, where known.
        evidence: where the facts come from and when (documented, measured or inferred).
        aliases: other names that look this entry up.
        thinking_display: Anthropic: the model's default ``thinking.display`` (``summarized``
            or ``omitted``) where documented; ``None`` = summarized, as the SDK states. Where
            it is ``omitted``, polythink asks for ``summarized`` so reasoning text comes back.
        sampling: which sampling parameters (``temperature``, ``top_p``, ``top_k``) the
            provider accepts with non-default values: ``any``; ``without_reasoning`` (only
            while the model does not reason on the call: OpenAI reasoning models);
            ``one_of`` (``temperature`` or ``top_p``, not both: Claude 4.1 and 4.5
            generation models); or ``never`` (Claude Opus 4.7, Sonnet 5).
        context_window: the model's context window in tokens (prompt and output together),
            where documented; failover uses it after a context-window error.
        stream_only_reasoning: the provider answers reasoning calls for this model only when
            streamed (DashScope thinking-only models); ``complete()`` then streams under the
            hood and assembles the answer.

    Raises:
        ValueError: at construction, for an empty or duplicated ``supported_efforts``, an
            unknown tier, thinking style or thinking display, or a budget range with
            ``min > max``.
    """

    model: str
    supported_efforts: tuple[Effort, ...]
    default_effort: Effort | None = None
    provider: str | None = None
    thinking: str | None = None
    budget_min: int | None = None
    budget_max: int | None = None
    max_output_tokens: int | None = None
    evidence: str = ""
    aliases: tuple[str, ...] = field(default=())
    thinking_display: str | None = None
    sampling: str = "any"
    context_window: int | None = None
    stream_only_reasoning: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.supported_efforts, str):
            raise ValueError(
                f"capability for {self.model!r}: supported_efforts must be a list of tiers "
                f"such as ('low', 'high'), not the string {self.supported_efforts!r}"
            )
        efforts = tuple(Effort.parse(e) for e in self.supported_efforts)
        if not efforts or any(e is None for e in efforts):
            raise ValueError(
                f"capability for {self.model!r}: supported_efforts must list at least one tier "
                f"of {', '.join(e.value for e in Effort)}; got {self.supported_efforts!r}"
            )
        if len(set(efforts)) != len(efforts):
            raise ValueError(
                f"capability for {self.model!r}: duplicate tier in {self.supported_efforts!r}"
            )
        ordered = tuple(e for e in (*EFFORT_ORDER, Effort.AUTO) if e in efforts)
        object.__setattr__(self, "supported_efforts", ordered)
        object.__setattr__(self, "default_effort", Effort.parse(self.default_effort))
        if self.thinking is not None and self.thinking not in _THINKING_STYLES:
            raise ValueError(
                f"capability for {self.model!r}: unknown thinking style {self.thinking!r}; "
                f"accepted: {', '.join(sorted(_THINKING_STYLES))}"
            )
        if (
            self.budget_min is not None
            and self.budget_max is not None
            and self.budget_min > self.budget_max
        ):
            raise ValueError(
                f"capability for {self.model!r}: budget_min {self.budget_min} > "
                f"budget_max {self.budget_max}"
            )
        object.__setattr__(self, "aliases", tuple(self.aliases))
        if self.sampling not in ("any", "without_reasoning", "one_of", "never"):
            raise ValueError(
                f"capability for {self.model!r}: unknown sampling {self.sampling!r}; "
                "accepted: any, without_reasoning, one_of, never"
            )
        if self.context_window is not None and (
            type(self.context_window) is not int or self.context_window <= 0
        ):
            raise ValueError(
                f"capability for {self.model!r}: context_window must be a positive number of "
                f"tokens; got {self.context_window!r}"
            )
        if self.thinking_display not in (None, "summarized", "omitted"):
            raise ValueError(
                f"capability for {self.model!r}: unknown thinking_display "
                f"{self.thinking_display!r}; accepted: summarized, omitted"
            )

    @property
    def reasons(self) -> bool:
        """Whether the model can reason at all (anything besides ``none`` is accepted)."""
        return any(e is not Effort.NONE for e in self.supported_efforts)

    @property
    def can_disable(self) -> bool:
        """Whether reasoning can be switched off (``none`` is accepted)."""
        return Effort.NONE in self.supported_efforts

    @property
    def strengths(self) -> tuple[Effort, ...]:
        """The accepted strength tiers (everything but ``none`` and ``auto``), cheapest first."""
        return tuple(e for e in self.supported_efforts if e not in (Effort.NONE, Effort.AUTO))

    @property
    def is_tiered(self) -> bool:
        """Whether the model has strength tiers (not only an on/off switch)."""
        return bool(self.strengths)

    @property
    def cheapest_effort(self) -> Effort | None:
        """The cheapest tier that reasons: the first strength, else ``auto``, else ``None``."""
        if self.strengths:
            return self.strengths[0]
        return Effort.AUTO if Effort.AUTO in self.supported_efforts else None

    @property
    def default_tier(self) -> Effort | None:
        """The tier the model reasons at on its own: the declared ``default_effort`` when it
        reasons, else the middle strength (the cheaper of two middles), else ``auto``;
        ``None`` for a model that does not reason."""
        if not self.reasons:
            return None
        if self.default_effort is not None and self.default_effort is not Effort.NONE:
            return self.default_effort
        strengths = self.strengths
        return strengths[(len(strengths) - 1) // 2] if strengths else Effort.AUTO

    @property
    def default_reasons(self) -> bool:
        """Whether sending no reasoning field makes the model reason (known defaults only)."""
        return self.default_effort is not None and self.default_effort is not Effort.NONE


_DATE_SUFFIX = re.compile(r"([-@]\d{4}-\d{2}-\d{2}|[-@]\d{8})$")
_lock = threading.Lock()
_entries: dict[str, Capability] | None = None
_index: dict[str, Capability] = {}


def normalise_model_name(name: str) -> str:
    """Return the lookup form of a model name.

    Lower-case; the part after the last ``/`` (drops ``openai/``, ``anthropic/`` …); an
    OpenRouter variant suffix (``:thinking``, ``:free``) and a date suffix
    (``-2025-08-07``, ``-20250929``, ``@20250929``) removed; ``.`` replaced by ``-``.

    >>> normalise_model_name("anthropic/claude-sonnet-4.5")
    'claude-sonnet-4-5'
    >>> normalise_model_name("gpt-5-2025-08-07")
    'gpt-5'
    """
    base = name.strip().lower().rsplit("/", 1)[-1].split(":", 1)[0]
    base = _DATE_SUFFIX.sub("", base)
    return base.replace(".", "-")


def _load() -> dict[str, Capability]:
    global _entries
    if _entries is not None:
        return _entries
    with _lock:
        if _entries is None:
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
    return Capability(
        model=row["name"],
        supported_efforts=tuple(row["supported_efforts"]),
        default_effort=row.get("default_effort"),
        provider=row.get("provider"),
        thinking=row.get("thinking"),
        budget_min=row.get("budget_min"),
        budget_max=row.get("budget_max"),
        max_output_tokens=row.get("max_output_tokens"),
        evidence=row.get("evidence", ""),
        aliases=tuple(row.get("aliases", ())),
        thinking_display=row.get("thinking_display"),
        sampling=row.get("sampling", "any"),
        context_window=row.get("context_window"),
        stream_only_reasoning=bool(row.get("stream_only_reasoning", False)),
    )


def _index_entry(cap: Capability) -> None:
    for name in (cap.model, *cap.aliases):
        _index[name] = cap
        _index[normalise_model_name(name)] = cap


def get_capability(model: str) -> Capability | None:
    """Look a model up in the registry; ``None`` when it is not registered.

    Tries the exact name, then the normalised name (see :func:`normalise_model_name`).
    An unregistered model is not an error: resolution injects by the provider's wire and
    warns once.
    """
    entries = _load()
    found = entries.get(model) or _index.get(model)
    if found is not None:
        return found
    return _index.get(normalise_model_name(model))


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
                for key in (name, normalise_model_name(name)):
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
            raise ValueError("an OpenRouter /models document has a 'data' list of models")
        return data
    return document
