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

import dataclasses
import datetime
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

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

_THINKING_STYLES = frozenset({"manual", "adaptive", "budget", "level", "effort"})
_SAMPLING_RULES = ("any", "without_reasoning", "one_of", "never")
_CHAT_TOOLS = ("any", "without_reasoning", "never")
_RETENTIONS = ("in_memory", "24h")
_REASONING_MODES = ("standard", "pro")
_SERVICE_TIERS = ("flex", "standard", "priority")
_DATES = ("deprecated", "shutdown", "checked")
_BINDINGS = ("enforced", "new_accounts", "checked")

PER_CALL_INSTRUCTIONS = ("system_message", "user_turn", "system")
"""Where per-call instructions may go (:attr:`Capability.per_call_instructions`)."""


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
            ``adaptive``; Gemini and Qwen ``budget``, Gemini 3 and later ``level``; Qwen
            ``effort``: ``enable_thinking`` with ``reasoning_effort``); ``None`` otherwise.
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
            generation models); or ``never`` (Claude 4.7 and later, every 5.x model).
        context_window: the model's context window in tokens (prompt and output together),
            where documented; failover uses it after a context-window error.
        stream_only_reasoning: the provider answers reasoning calls for this model only when
            streamed (DashScope thinking-only models); ``complete()`` then streams under the
            hood and assembles the answer.
        deprecated: ISO date (``YYYY-MM-DD``) the provider announced the model's retirement.
        shutdown: ISO date from which the provider no longer serves the model (it may still
            answer through an alias or a silent re-route, as Gemini does).
        replacement: the model the provider names in its place, where it names one.
        checked: ISO date the entry's facts were last compared with their sources.
        chat_tools: whether Chat Completions takes function tools for this model: ``any``;
            ``without_reasoning`` (only at ``reasoning_effort: none``: GPT-6 Sol and Luna);
            ``never`` (the Responses API only: GPT-6 Astra, GPT-6.1 Sol). An ``openai`` source
            sends such a call to the Responses API (see :mod:`polythink.transports.route`).
        forced_tool_choice: whether the model takes a forced ``tool_choice`` (Anthropic ``any``
            / ``tool``); ``False`` on Claude Fable/Mythos 5.1 and later, Opus 5.5, Sonnet 5.5.
        signed_tool_calls: Gemini: every model turn's first function call must carry a
            ``thoughtSignature`` (Gemini 3 and later); the transport gives a call another
            provider made the documented placeholder.
        prompt_cache_retention: the ``prompt_cache_retention`` values OpenAI accepts for the
            model (``("24h",)`` on gpt-5.5 and later); empty = not known, sent as asked.
        prompt_cache_options: OpenAI takes ``prompt_cache_options`` (gpt-5.6 and later).
        reasoning_modes: the Responses ``reasoning.mode`` values the model takes
            (``standard``, ``pro``: GPT-5.6 and later); empty = none.
        per_call_instructions: where the model's native API gets per-call instructions
            (``system_suffix``, a structured-output instruction) so that nothing already sent
            changes: ``system_message`` (a mid-conversation system message after the last
            user turn: Anthropic models that take one, MCSM-CUR), ``user_turn`` (a user
            message after it), or ``system`` (the system prompt, edited every call: the
            prefix changes, so the prompt cache misses and, on a model that binds thinking
            to its prefix, replayed thinking fails). ``None``: the provider profile's
            (:attr:`~polythink.providers.ProviderProfile.per_call_instructions`).
        clear_at: the model takes a turn-scoped mid-conversation system message
            (``clear_at: "next_user_message"``, beta
            ``mid-conversation-system-clear-at-2026-08-21``): once cleared, a kept copy costs
            no input tokens (PT-SEP, CONTINUITY.md §2.4).
        thinking_binding: Anthropic preserved thinking: the model binds each thinking block
            to the conversation before it and checks it when it comes back (CONTINUITY.md
            §1.1-1.3): ``enforced`` (a failed check is a 400 on every account: Fable and
            Mythos 5.2), ``new_accounts`` (a 400 on accounts created from 2026-08-31, the
            block reaches the model on older ones: Fable 5.1, Opus 5.5), ``checked`` (the
            check runs; what a failure does by default is not documented: Sonnet and Haiku
            5.5); ``None``: no prefix check. Such a model takes
            ``thinking.block_binding`` and reports ``input_transformations`` under the beta
            ``thinking-binding-controls-2026-08-01``.
        service_tiers: the service tiers the provider serves the model at (``flex``,
            ``standard``, ``priority``) where known; empty = every tier the provider offers
            (its :class:`~polythink.providers.TierWire`). A provider's refusal of a tier for a
            model is learned into it, per endpoint.

    Raises:
        ValueError: at construction, for an empty or duplicated ``supported_efforts``, an
            unknown tier, thinking style, thinking display, sampling rule, tools rule,
            retention, reasoning mode or service tier, a date that is not ``YYYY-MM-DD``, or
            a budget range with ``min > max``.
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
    deprecated: str | None = None
    shutdown: str | None = None
    replacement: str | None = None
    checked: str | None = None
    chat_tools: str = "any"
    forced_tool_choice: bool = True
    signed_tool_calls: bool = False
    prompt_cache_retention: tuple[str, ...] = ()
    prompt_cache_options: bool = False
    reasoning_modes: tuple[str, ...] = ()
    per_call_instructions: str | None = None
    clear_at: bool = False
    thinking_binding: str | None = None
    service_tiers: tuple[str, ...] = ()

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
        self._check_choice("sampling", self.sampling, _SAMPLING_RULES)
        self._check_choice("chat_tools", self.chat_tools, _CHAT_TOOLS)
        if self.per_call_instructions is not None:
            self._check_choice(
                "per_call_instructions", self.per_call_instructions, PER_CALL_INSTRUCTIONS
            )
        if self.thinking_binding is not None:
            self._check_choice("thinking_binding", self.thinking_binding, _BINDINGS)
        for name, accepted in (
            ("prompt_cache_retention", _RETENTIONS),
            ("reasoning_modes", _REASONING_MODES),
            ("service_tiers", _SERVICE_TIERS),
        ):
            values = tuple(getattr(self, name))
            object.__setattr__(self, name, values)
            for value in values:
                self._check_choice(name, value, accepted)
        for name in _DATES:
            value = getattr(self, name)
            if value is None:
                continue
            try:
                datetime.date.fromisoformat(value)
            except (TypeError, ValueError):
                raise ValueError(
                    f"capability for {self.model!r}: {name} must be a date as YYYY-MM-DD; "
                    f"got {value!r}"
                ) from None
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

    def _check_choice(self, name: str, value: Any, accepted: Sequence[str]) -> None:
        if value not in accepted:
            raise ValueError(
                f"capability for {self.model!r}: unknown {name} {value!r}; "
                f"accepted: {', '.join(accepted)}"
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
        raise ValueError(f"capabilities.toml: entry {row.get('name')!r}: {exc}") from exc


_FIELDS: tuple[dataclasses.Field[Any], ...] = tuple(
    f for f in dataclasses.fields(Capability) if f.name != "model"
)
_FIELD_NAMES = frozenset(f.name for f in _FIELDS)


def capability_from_fields(
    model: str, fields: Mapping[str, Any], *, evidence: str | None = None
) -> Capability:
    """Build a :class:`Capability` from plain data (a registry row, a store file's JSON).

    Keys are the capability's field names (``name`` is ignored: ``model`` names the entry);
    lists become tuples; a ``None`` value keeps the field's default. ``evidence`` replaces
    the row's own.

    Raises:
        ValueError: for a key that is no field of :class:`Capability` (a typo in the data),
            or a value the capability refuses (see :class:`Capability`).
    """
    unknown = sorted(set(fields) - _FIELD_NAMES - {"name"})
    if unknown:
        raise ValueError(
            f"unknown capability field(s) {', '.join(unknown)} for {model!r}; known: "
            f"{', '.join(sorted(_FIELD_NAMES))}"
        )
    values: dict[str, Any] = {
        name: tuple(value) if isinstance(value, list) else value
        for name, value in fields.items()
        if name in _FIELD_NAMES and value is not None
    }
    if evidence is not None:
        values["evidence"] = evidence
    return Capability(model=model, **values)


def capability_fields(capability: Capability) -> dict[str, Any]:
    """Return the fields of ``capability`` that differ from their defaults, as JSON values
    (tiers as strings, tuples as lists); ``model`` and ``evidence`` are left out.
    :func:`capability_from_fields` reads it back."""
    out: dict[str, Any] = {}
    for f in _FIELDS:
        if f.name == "evidence":
            continue
        value = getattr(capability, f.name)
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if value == default and f.name != "supported_efforts":
            continue
        if isinstance(value, Effort):
            value = value.value
        elif isinstance(value, tuple):
            value = [v.value if isinstance(v, Effort) else v for v in value]
        out[f.name] = value
    return out


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
            raise ValueError("an OpenRouter /models document has a 'data' list of models")
        return data
    return document
