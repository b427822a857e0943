"""Value types shared by every layer: messages, requests, responses, usage, stream events.

This is the innermost module of the package: it imports nothing from polythink, so every
other module may depend on it and it depends on none of them. All types are frozen
dataclasses; derive a changed value with :func:`dataclasses.replace` (or ``Request.with_``),
never by mutating one in place.

What a value checks when it is built lives here with it: a message's content, parts and text
(:func:`check_content`, :func:`check_part`, :func:`check_text`), a tool's JSON schema
(:func:`check_json`), a response format's schema, and the credential redaction of a
request's ``repr`` (:func:`redacted`, :data:`KEY_SHAPES`). Converting a call's input once
(:func:`polythink.conversion.coerce_messages`, ``coerce_tools``, ``tools_memo``,
``PrefixStates``) and reading JSON from the other side
(:func:`polythink.wire_json.loads_json`, ``check_extra_body``) have modules of their own;
their names still resolve from here.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeAlias, cast

import orjson
from typing_extensions import TypeVar

__all__ = [
    "CONTENT_PARTS",
    "EFFORT_ORDER",
    "MESSAGE_KEYS",
    "PREFIX_MISMATCH",
    "SERVICE_TIER_ORDER",
    "CacheMode",
    "Cost",
    "DoneEvent",
    "Effort",
    "FinishReason",
    "Message",
    "MessageMetadata",
    "NativeBody",
    "NativeRelay",
    "PromptCache",
    "RateLimit",
    "ReasoningEvent",
    "Request",
    "Resolution",
    "Response",
    "ResponseFormat",
    "ServiceTier",
    "StepDown",
    "StreamEvent",
    "StreamEventType",
    "TextEvent",
    "ThinkingObservation",
    "TierResolution",
    "Tool",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallDeltaEvent",
    "ToolCallEvent",
    "TypedStreamEvent",
    "Usage",
    "UsageEvent",
    "check_content",
    "check_json",
    "check_part",
    "check_text",
    "credential_name",
    "redacted",
]


_T = TypeVar("_T")
_ParsedT = TypeVar("_ParsedT", default=object, covariant=True)
"""What :attr:`Response.parsed` holds: the caller's model class on a structured call; a bare
``Response`` is ``Response[object]``."""
_OutputT = TypeVar("_OutputT", default=Any, covariant=True)
"""What a :class:`ResponseFormat` parses into: its pydantic model class, else ``Any``."""


class Effort(enum.StrEnum):
    """One reasoning-effort tier of polythink's vocabulary.

    Ordered cheapest to dearest: ``none`` < ``minimal`` < ``low`` < ``medium`` < ``high`` <
    ``xhigh`` < ``max``. ``auto`` means "reason, strength unspecified" and is not on that
    ordering. ``None`` (the Python value, "unset") is different from ``Effort.NONE``: unset
    sends nothing and leaves the model's own default, ``none`` asks for no reasoning.
    """

    NONE = "none"
    MINIMAL = "minimal"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    XHIGH = "xhigh"
    MAX = "max"
    AUTO = "auto"

    @classmethod
    def parse(cls, value: Effort | str | bool | None) -> Effort | None:
        """Normalise user input to an ``Effort`` or ``None`` (unset).

        Accepts an ``Effort``, ``None``, a bool (``True`` -> ``auto``, ``False`` -> ``none``)
        or a string; strings ignore case and surrounding spaces and take the aliases
        ``off`` -> ``none``, ``on``/``true`` -> ``auto``, ``false`` -> ``none``.

        Raises:
            ValueError: for any other value; the message lists the accepted ones.
        """
        if value is None or isinstance(value, Effort):
            return value
        if isinstance(value, bool):
            return cls.AUTO if value else cls.NONE
        if isinstance(value, str):
            key = value.strip().lower()
            found = _EFFORT_INPUT.get(key)
            if found is not None:
                return found
        raise InvalidInputError(
            f"unknown reasoning effort {value!r}; accepted: "
            + ", ".join(e.value for e in (*EFFORT_ORDER, Effort.AUTO))
            + " (aliases: off, on, true, false; or a bool, or None for unset)"
        )

    @property
    def rank(self) -> int | None:
        """Position on the cheap-to-dear ordering (0 = ``none``); ``None`` for ``auto``."""
        return _EFFORT_RANK.get(self)


EFFORT_ORDER: tuple[Effort, ...] = (
    Effort.NONE,
    Effort.MINIMAL,
    Effort.LOW,
    Effort.MEDIUM,
    Effort.HIGH,
    Effort.XHIGH,
    Effort.MAX,
)
"""The tiers on the ordering, cheapest first (``auto`` is not among them)."""

_EFFORT_RANK: dict[Effort, int] = {e: i for i, e in enumerate(EFFORT_ORDER)}
_EFFORT_INPUT: dict[str, Effort] = {
    **{e.value: e for e in Effort},
    "off": Effort.NONE,
    "false": Effort.NONE,
    "on": Effort.AUTO,
    "true": Effort.AUTO,
}


class ServiceTier(enum.StrEnum):
    """One service tier of polythink's vocabulary: how fast, and at what price, a provider
    serves a call.

    Ordered cheapest to dearest: ``flex`` (slower, best effort, about half the price where
    offered) < ``standard`` (the provider's default pay-as-you-go) < ``priority`` (faster,
    at a premium). ``auto`` lets the provider choose (its project setting or its default)
    and is not on that ordering. ``None`` (the Python value, "unset") sends nothing. Each
    provider spells the tiers its own way; the transports send them as the provider's
    :class:`~polythink.providers.TierWire` says.
    """

    FLEX = "flex"
    STANDARD = "standard"
    PRIORITY = "priority"
    AUTO = "auto"

    @classmethod
    def parse(cls, value: ServiceTier | str | None) -> ServiceTier | None:
        """Normalise user input to a ``ServiceTier`` or ``None`` (unset).

        Strings ignore case and surrounding spaces; ``default`` is read as ``standard``
        (OpenAI's name for it).

        Raises:
            ValueError: for any other value; the message lists the accepted ones.
        """
        if value is None or isinstance(value, ServiceTier):
            return value
        if isinstance(value, str):
            found = _TIER_INPUT.get(value.strip().lower())
            if found is not None:
                return found
        raise InvalidInputError(
            f"unknown service tier {value!r}; accepted: flex, standard, priority, auto "
            "(alias: default = standard; or None for unset)"
        )

    @property
    def rank(self) -> int | None:
        """Position on the cheap-to-dear ordering (0 = ``flex``); ``None`` for ``auto``."""
        return _TIER_RANK.get(self)


SERVICE_TIER_ORDER: tuple[ServiceTier, ...] = (
    ServiceTier.FLEX,
    ServiceTier.STANDARD,
    ServiceTier.PRIORITY,
)
"""The service tiers on the ordering, cheapest first (``auto`` is not among them)."""

_TIER_RANK: dict[ServiceTier, int] = {t: i for i, t in enumerate(SERVICE_TIER_ORDER)}
_TIER_INPUT: dict[str, ServiceTier] = {
    **{t.value: t for t in ServiceTier},
    "default": ServiceTier.STANDARD,
}


class ThinkingObservation(enum.StrEnum):
    """What a response shows about whether the model reasoned.

    ``observed``: reasoning text was non-blank or reasoning tokens > 0. ``absent``: the
    provider explicitly reported 0 reasoning tokens and sent no reasoning text. ``unknown``:
    neither (never read "did not see" as "did not happen").
    """

    OBSERVED = "observed"
    ABSENT = "absent"
    UNKNOWN = "unknown"


FinishReason: TypeAlias = Literal["stop", "length", "tool_calls", "content_filter", "error"]
StreamEventType: TypeAlias = Literal[
    "text", "reasoning", "tool_call_delta", "tool_call", "usage", "done"
]
CacheMode: TypeAlias = bool | Literal["refresh"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One function call the model asked for.

    ``arguments`` is the JSON string exactly as the model sent it (it may be invalid JSON;
    polythink never re-serialises it).
    """

    id: str
    name: str
    arguments: str = "{}"

    @classmethod
    def from_openai(cls, data: Mapping[str, Any]) -> ToolCall:
        """Build from an OpenAI chat ``tool_calls[]`` entry (``{id, type, function: {...}}``),
        or from the flat ``{id, name, arguments}`` shape of a serialised ``ToolCall``.

        Raises:
            ValueError: when the entry names no function.
        """
        function = data.get("function")
        if function is None and "name" in data:
            function = data
        if not isinstance(function, Mapping) or not function.get("name"):
            raise InvalidInputError(
                "a tool call needs a function name: {'id', 'type': 'function', 'function': "
                f"{{'name', 'arguments'}}}} or {{'id', 'name', 'arguments'}}; got {dict(data)!r}"
            )
        arguments = function.get("arguments", "{}")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, separators=(",", ":"))
        return cls(
            id=str(data.get("id") or ""), name=str(function.get("name") or ""), arguments=arguments
        )

    def to_openai(self) -> dict[str, Any]:
        """Return the OpenAI chat ``tool_calls[]`` entry for this call."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    """A function the model may call: name, description and a JSON Schema for its arguments.

    ``name`` is 1 to 64 letters, digits, ``_`` or ``-`` (what OpenAI, Anthropic and Gemini
    all accept); ``parameters`` is a JSON Schema object (a dict with ``"type": "object"``),
    sent as written. ``strict`` asks for arguments decoded against that schema: OpenAI Chat
    (``function.strict``) and Anthropic (``strict``) get it when set, Responses always
    (false unless set); Gemini, which has no per-function flag, gets
    ``functionCallingConfig.mode`` ``VALIDATED`` for a call with a strict tool that does not
    force one (see :mod:`polythink.transports.gemini`).

    Raises:
        ValueError: at construction, for a name or a schema the providers would refuse, a
            schema JSON cannot represent (a set, an object; see :func:`check_json`), or a
            description or schema string holding a lone surrogate (see :func:`check_text`).
    """

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    strict: bool | None = None

    def __post_init__(self) -> None:
        # What every provider accepts: OpenAI ``FunctionObject.name`` (a-z, A-Z, 0-9, _ and -,
        # at most 64), Anthropic ``Tool.name`` (^[a-zA-Z0-9_-]{1,128}$) and Gemini
        # ``FunctionDeclaration.name`` (also . and :, at most 64): the shared subset. Sources:
        # the OpenAI and Anthropic OpenAPI documents and generativelanguage v1beta
        # content.proto, as copied on 2026-11-28.
        if not isinstance(self.name, str) or _TOOL_NAME.fullmatch(self.name) is None:
            raise InvalidInputError(
                f"tool name {self.name!r} is refused by providers: use 1 to 64 letters, digits, "
                "'_' or '-' (OpenAI and Gemini allow 64 characters, Anthropic 128; Gemini also "
                "'.' and ':'; only the common part works everywhere)"
            )
        if not isinstance(self.description, str):
            raise InvalidInputError(
                f"tool {self.name!r}: description must be a string; got "
                f"{type(self.description).__name__}"
            )
        check_text(self.description, f"tool {self.name!r}: description")
        params = self.parameters
        if not isinstance(params, Mapping) or params.get("type") != "object":
            got = (
                f"a {type(params).__name__}"
                if not isinstance(params, Mapping)
                else f"type {params.get('type')!r}"
            )
            raise InvalidInputError(
                f"tool {self.name!r}: parameters must be a JSON Schema object, a dict with "
                f'"type": "object" (and usually "properties"); got {got}. OpenAI, Anthropic '
                "(input_schema) and Gemini (parameters) all take an object schema for the "
                "arguments"
            )
        props = params.get("properties")
        if props is not None and not isinstance(props, Mapping):
            raise InvalidInputError(
                f"tool {self.name!r}: parameters.properties must be a dict of property "
                f"schemas; got {type(props).__name__}"
            )
        if self.strict is not None and not isinstance(self.strict, bool):
            raise InvalidInputError(f"tool {self.name!r}: strict must be a bool or None")
        check_json(params, f"tool {self.name!r}: parameters")

    @classmethod
    def coerce(cls, value: Tool | Mapping[str, Any]) -> Tool:
        """Accept a ``Tool``, an OpenAI ``{"type": "function", "function": {...}}`` dict, or a
        flat ``{"name", "description", "parameters"}`` dict.

        Raises:
            ValueError: when the dict has no function name, an unknown key, or a name or
                schema providers refuse (see :class:`Tool`).
        """
        if isinstance(value, Tool):
            return value
        spec: Mapping[str, Any] = value.get("function", value)
        name = spec.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidInputError(f"a tool needs a non-empty 'name'; got {dict(value)!r}")
        unknown = spec.keys() - _TOOL_KEYS
        if unknown:
            raise InvalidInputError(
                f"tool {name!r} has unknown key(s) {', '.join(map(repr, sorted(unknown)))}; "
                f"accepted: {', '.join(sorted(_TOOL_KEYS))}"
            )
        params = spec.get("parameters")
        return cls(
            name=name,
            description=str(spec.get("description") or ""),
            parameters=params if params is not None else {"type": "object", "properties": {}},
            strict=spec.get("strict"),
        )


def _opaque_items(value: Any, name: str) -> tuple[Mapping[str, Any], ...]:
    """A message's opaque reasoning items (``reasoning_details``, ``reasoning_items``).

    Raises:
        InvalidInputError: ``value`` is not a list (or tuple) of objects.
    """
    if isinstance(value, list | tuple) and all(isinstance(item, Mapping) for item in value):
        return tuple(value)
    raise InvalidInputError(
        f"a message's {name} must be a list of objects (the provider's reasoning items, "
        f"sent back as received), not {type(value).__name__}"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageMetadata:
    """What polythink records about an assistant turn it returned, for the application only.

    It is never sent to a provider and never part of a cache key: the transports build
    bodies from the other :class:`Message` fields only. A conversation that changed
    provider or model mid-way can be read back turn by turn from it.

    Attributes:
        provider: the provider id of the source that answered (``anthropic``, ``openai`` …).
        model: the model as the server reported it (``claude-haiku-4-5-20251001``), which
            may differ from the source's configured name.
        source_index: the answering source's position in the client.
        started_at: when the call started, in seconds since the Unix epoch.
        duration: how long the call took, in seconds (for a stream: to its last event or
            to the break).
        interrupted: the turn is the partial output of a stream that broke
            (:attr:`Response.interrupted`); it is not an answer. See
            :func:`polythink.conversation.resume_interrupted`.
        prefix_mismatch: ``"drop_block"`` once Anthropic refused a thinking block of this
            conversation ("bound to a different conversation") and polythink, allowed by
            ``prefix_mismatch="drop_block"``, sent the call again with
            ``thinking.block_binding.prefix_mismatch_behavior: "drop_block"``: the
            conversation keeps that choice, as Anthropic asks (CONTINUITY.md §1.4), so every
            later call of it sends ``drop_block`` too, after a save and load as well. The one
            field of the metadata that decides what a later call sends, so it is part of the
            cache key when set; ``None`` otherwise.
    """

    provider: str | None = None
    model: str | None = None
    source_index: int | None = None
    started_at: float | None = None
    duration: float | None = None
    interrupted: bool = False
    prefix_mismatch: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict of the fields that are set (``interrupted`` only when
        true)."""
        out: dict[str, Any] = {}
        for name in _METADATA_FIELDS:
            value = getattr(self, name)
            if value is not None and value is not False:
                out[name] = value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MessageMetadata:
        """Build from :meth:`to_dict`'s shape.

        Raises:
            ValueError: for a key that is not a metadata field, or a value of the wrong type.
        """
        if not isinstance(data, Mapping):
            raise InvalidInputError(f"message metadata must be a dict; got {type(data).__name__}")
        unknown = sorted(set(data) - set(_METADATA_FIELDS))
        if unknown:
            raise InvalidInputError(
                f"unknown message metadata keys {unknown}; accepted: {list(_METADATA_FIELDS)}"
            )
        for name in ("provider", "model"):
            if data.get(name) is not None and not isinstance(data[name], str):
                raise InvalidInputError(
                    f"message metadata {name} must be a string; got {data[name]!r}"
                )
        index = data.get("source_index")
        if index is not None and (type(index) is not int or index < 0):
            raise InvalidInputError(
                f"message metadata source_index must be an int >= 0; got {index!r}"
            )
        for name in ("started_at", "duration"):
            value = data.get(name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float)
            ):
                raise InvalidInputError(f"message metadata {name} must be seconds; got {value!r}")
        interrupted = data.get("interrupted", False)
        if not isinstance(interrupted, bool):
            raise InvalidInputError(
                f"message metadata interrupted must be a bool; got {interrupted!r}"
            )
        mismatch = data.get("prefix_mismatch")
        if mismatch is not None and mismatch not in PREFIX_MISMATCH:
            raise InvalidInputError(
                f"message metadata prefix_mismatch must be one of {', '.join(PREFIX_MISMATCH)}; "
                f"got {mismatch!r}"
            )
        return cls(
            provider=data.get("provider"),
            model=data.get("model"),
            source_index=index,
            started_at=data.get("started_at"),
            duration=data.get("duration"),
            interrupted=interrupted,
            prefix_mismatch=mismatch,
        )


_METADATA_FIELDS = (
    "provider",
    "model",
    "source_index",
    "started_at",
    "duration",
    "interrupted",
    "prefix_mismatch",
)

PREFIX_MISMATCH = ("error", "drop_block")
"""The values of ``prefix_mismatch`` (Anthropic's
``thinking.block_binding.prefix_mismatch_behavior``, CONTINUITY.md §1.3)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One turn of a conversation, in a provider-neutral shape.

    ``role`` is ``system``, ``developer``, ``user``, ``assistant`` or ``tool``. ``content`` is a
    string, ``None``, or a list of OpenAI-style content parts (:data:`CONTENT_PARTS`, each
    checked for its required keys, or a block type of one provider's wire, which the
    transport of each source checks before sending); each is passed on unchanged where the
    wire takes it as is. A system, developer, user or tool message needs content (a string,
    or a non-empty list); an assistant message content or one of ``tool_calls``,
    ``reasoning``, ``reasoning_items``. Text with a lone surrogate is refused: it could not be
    sent. A message is checked once, when it is built (:meth:`coerce` checks a dict as the
    constructor does).

    Reasoning fields, set on assistant turns that polythink parsed:

    - ``reasoning``: the readable reasoning text. Wires that take it back (DeepSeek's and
      Qwen's ``reasoning_content`` on tool-call turns, Qwen's on every turn with
      ``preserve_thinking``; GLM and Kimi ``reasoning_content``; OpenRouter and Ollama
      ``reasoning``) resend it on the next turn. Where a wire does not take it (OpenAI
      Chat, Anthropic, Gemini and the Responses API take back only their own signed or
      encrypted items), it is left out with a note in the response's warnings, unless the
      turn came from that provider (same ``reasoning_format``): then the provider's round
      trip decides.
    - ``reasoning_items``: the provider's opaque items, verbatim, in the provider's own shape
      (Anthropic content blocks with thinking signatures, OpenAI Responses output items with
      ``encrypted_content``, Gemini parts with ``thoughtSignature``, OpenRouter
      ``reasoning_details``). They are sent back unchanged only to a wire of the same
      ``reasoning_format``; another wire ignores them, because signatures only verify where
      they were made. Only what that wire refuses is left out (Anthropic text blocks that
      are empty or whitespace only, Gemini parts with empty text and no signature).
    - ``reasoning_format``: the wire that produced ``reasoning_items`` or ``reasoning``
      (``anthropic``, ``openai-responses``, ``openrouter-responses``, ``gemini``,
      ``openrouter``, ``deepseek``, ``qwen``; ``None`` for the caller's own turns).

    ``name`` tells participants of one role apart (OpenAI Chat's ``name``); on a tool message
    it is the function's name (Gemini's ``functionResponse.name``, Responses'
    ``function_call_output.name``). The Chat fields of an assistant turn have their own:

    - ``refusal``: the model's refusal message (Chat's ``refusal``); a wire without one gets
      it as the turn's text.
    - ``audio_id``: the id of a previous audio answer (Chat's ``audio: {"id": ...}``); only
      OpenAI Chat carries it.
    - ``function_call``: the legacy call of Chat's ``function_call`` (``name`` and
      ``arguments``; its ``id`` is empty, the legacy shape has none). Only Chat carries it:
      the other wires pair a call with its result by id, so there it is refused; send
      ``tool_calls`` instead.

    Raises:
        ValueError: an unknown role, missing content, a malformed content part (naming its
            index, what was wrong and what is accepted), text with a lone surrogate (naming
            the field), a tool message without ``tool_call_id``, a ``name`` or ``refusal``
            that is not a string, ``refusal``, ``audio_id`` or ``function_call`` on a turn
            that is not the assistant's.

    ``instructions`` is set by polythink on an assistant turn it returned from a wire that
    keeps per-call instructions in place (Anthropic): the message that carried the call's
    per-call instructions (``system_suffix``, a structured-output instruction) right before
    this turn, in the provider's own shape (a mid-conversation ``{"role": "system", ...}``
    message, turn-scoped with ``clear_at``, or a ``{"role": "user", ...}`` message on a model
    without mid-conversation system messages). Later calls send it again in the same place,
    unchanged, so what was sent stays the prefix of what is sent next and the turn's thinking
    blocks stay bound to it (CONTINUITY.md §2.4: "keep every earlier copy in place
    byte-identical"). Other wires leave it out: there only the newest instructions are sent,
    after the conversation. ``None`` otherwise.

    ``metadata`` (:class:`MessageMetadata`) is what polythink recorded about an assistant
    turn it returned: provider, model as served, source index, start and duration, and
    whether it is an interrupted partial. It never reaches a provider or a cache key, and
    two messages that differ only in it are equal.

    :meth:`to_dict` / :meth:`from_dict` round-trip a message through JSON exactly, opaque
    reasoning items included, so a saved conversation resumes on another day with its
    signatures intact (see :mod:`polythink.conversation` for JSON-lines files).
    """

    role: str
    content: str | list[Any] | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    reasoning: str | None = None
    reasoning_items: tuple[Mapping[str, Any], ...] = ()
    reasoning_format: str | None = None
    refusal: str | None = None
    audio_id: str | None = None
    function_call: ToolCall | None = None
    instructions: Mapping[str, Any] | None = None
    metadata: MessageMetadata | None = field(default=None, compare=False)

    _memo: tuple[str, Any] | dict[str, Any] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    """Shapes derived from this value, by the name of what derived them (see :meth:`memo`)."""

    def __post_init__(self) -> None:
        if self.role not in _ROLE_SET:
            raise InvalidInputError(
                f"unknown message role {self.role!r}; accepted: {', '.join(_ROLES)}"
            )
        content = self.content
        if (
            content is not None
            and content.__class__ is not str
            and not isinstance(content, str | list)
        ):
            raise InvalidInputError(
                "message content must be a string, a list of content parts, or None; got "
                f"{type(content).__name__}"
            )
        if self.role == "tool" and not (isinstance(self.tool_call_id, str) and self.tool_call_id):
            raise InvalidInputError("a tool message needs the tool_call_id of the call it answers")
        calls = self.tool_calls
        if calls.__class__ is not tuple:
            calls = tuple(calls)
            object.__setattr__(self, "tool_calls", calls)
        for call in calls:
            if call.__class__ is not ToolCall and not isinstance(call, ToolCall):
                raise InvalidInputError("Message.tool_calls must hold ToolCall values")
        if self.function_call is not None and not isinstance(self.function_call, ToolCall):
            raise InvalidInputError("Message.function_call must be a ToolCall or None")
        if self.reasoning_items.__class__ is not tuple:
            object.__setattr__(self, "reasoning_items", tuple(self.reasoning_items))
        if self.metadata is not None and not isinstance(self.metadata, MessageMetadata):
            if not isinstance(self.metadata, Mapping):
                raise InvalidInputError(
                    "Message.metadata must be a MessageMetadata, a dict or None"
                )
            object.__setattr__(self, "metadata", MessageMetadata.from_dict(self.metadata))
        _check_message(self)

    def memo(self, name: str, derive: Callable[[Message], _T]) -> _T:
        """Return ``derive(self)``, computed once per ``name`` for this value.

        A ``Message`` is immutable, so what a transport or the cache derives from it (its
        body on one wire, its canonical bytes in a cache key) holds for as long as the
        value lives: an agent loop that keeps its messages converts only the new ones each
        turn. ``name`` must say everything the derived value depends on besides the
        message (for example the wire and the provider). The derived value is shared:
        treat it as read-only, as the message itself (content parts and reasoning items
        included) must be.
        """
        memo = self._memo
        if memo is None:
            # Most messages are derived for one purpose only: a pair until a second one.
            value = derive(self)
            object.__setattr__(self, "_memo", (name, value))
            return value
        if isinstance(memo, tuple):
            if memo[0] == name:
                found: _T = memo[1]
                return found
            table = {memo[0]: memo[1]}
            object.__setattr__(self, "_memo", table)
        elif name in memo:
            return cast(_T, memo[name])
        else:
            table = memo
        value = derive(self)
        table[name] = value
        return value

    @classmethod
    def coerce(cls, value: Message | Mapping[str, Any]) -> Message:
        """Accept a ``Message`` or an OpenAI chat-shaped dict.

        The dict may carry ``reasoning_content`` or ``reasoning`` (string) for the reasoning
        text, and ``reasoning_details`` (OpenRouter) for opaque items. Every key of the
        OpenAI chat request messages is accepted (an assistant's ``refusal``, ``audio``
        (``{"id": ...}``, kept as ``audio_id``) and legacy ``function_call``
        (``{"name", "arguments"}``) too), and every field of ``Message``; any other key is
        refused, as is a system, developer, user or tool message without ``content``, or an
        assistant message with neither content nor any output.

        Raises:
            ValueError: when the value is not a message or dict, or is malformed (unknown
                role or key, missing content, a tool message without ``tool_call_id``, a
                tool call without a name, a ``name`` that is not a string, an ``audio`` or
                ``function_call`` of another shape); the message names the key and lists
                the accepted ones.
        """
        if value.__class__ is Message or isinstance(value, Message):
            return value
        if value.__class__ is dict and cls is Message and _PLAIN_KEYS.issuperset(value):
            # The common dict (role, string content, maybe tool calls, a tool message's
            # id): the checks below reduced to what such a dict can fail, then built as
            # the slots path below builds it. Anything else falls through to them.
            fetch = value.get
            role = fetch("role")
            content = fetch("content")
            raw_calls = fetch("tool_calls")
            if role.__class__ is str and role in _ROLE_SET:
                if content.__class__ is str:
                    plain = True
                else:
                    plain = content is None and role == "assistant" and bool(raw_calls)
                if plain and raw_calls and raw_calls.__class__ is not list:
                    plain = False
                tool_call_id = fetch("tool_call_id")
                name = fetch("name")
                if (name is not None and name.__class__ is not str) or (
                    tool_call_id is not None and role != "tool"
                ):
                    plain = False
                if plain and (role != "tool" or (tool_call_id.__class__ is str and tool_call_id)):
                    fill: Any = _new(_MessageSlots)
                    fill.role = role
                    fill.content = content
                    fill.tool_calls = tuple([_tool_call(c) for c in raw_calls]) if raw_calls else ()
                    fill.tool_call_id = tool_call_id
                    fill.name = name
                    fill.reasoning = None
                    fill.reasoning_items = ()
                    fill.reasoning_format = None
                    fill.refusal = None
                    fill.audio_id = None
                    fill.function_call = None
                    fill.metadata = None
                    fill._memo = None
                    for later, make in _LATER_DEFAULTS:
                        setattr(fill, later, make())
                    fill.__class__ = cast(Any, Message)
                    fast: Message = fill
                    if (
                        raw_calls
                        or name is not None
                        or not (
                            content is None
                            or content.isascii()
                            or _SURROGATE.search(content) is None
                        )
                    ):
                        _check_fields(fast)
                    return fast
        if value.__class__ is not dict and not isinstance(value, Mapping):
            raise InvalidInputError(
                "each message must be a Message or an OpenAI-style dict with 'role' and "
                f"'content'; got {type(value).__name__}"
            )
        get = value.get
        role = get("role")
        if (role.__class__ is not str and not isinstance(role, str)) or not role:
            raise InvalidInputError(f"a message needs a 'role' string; got {dict(value)!r}")
        if not _MESSAGE_KEYS.issuperset(value):
            unknown = sorted(map(str, value.keys() - _MESSAGE_KEYS))
            raise InvalidInputError(
                f"{role} message has unknown key(s) {', '.join(map(repr, unknown))}; "
                f"accepted: {', '.join(sorted(_MESSAGE_KEYS))}"
            )
        if get("content") is None and (
            role in _NEEDS_CONTENT or not any(get(k) for k in _ASSISTANT_OUTPUT)
        ):
            needs = "" if role in _NEEDS_CONTENT else ", or one of " + ", ".join(_ASSISTANT_OUTPUT)
            raise InvalidInputError(
                f"{role} message has no content: it needs 'content' (a string or a list of "
                f"content parts){needs}"
            )
        raw_calls = get("tool_calls") or ()
        calls: tuple[ToolCall, ...] = ()
        if raw_calls:
            if raw_calls.__class__ is not list and not isinstance(raw_calls, tuple):
                raise InvalidInputError("a message's tool_calls must be a list of tool calls")
            calls = tuple([_tool_call(c) for c in raw_calls])
        reasoning = get("reasoning_content")
        if reasoning is None:
            reasoning = get("reasoning")
            if reasoning is not None and not isinstance(reasoning, str):
                reasoning = None
        items: tuple[Mapping[str, Any], ...] = ()
        fmt = get("reasoning_format")
        details = get("reasoning_details")
        if details:
            items, fmt = _opaque_items(details, "reasoning_details"), fmt or "openrouter"
        else:
            raw_items = get("reasoning_items")
            if raw_items:
                items = _opaque_items(raw_items, "reasoning_items")
        content = get("content")
        tool_call_id = get("tool_call_id")
        metadata = get("metadata")
        audio = get("audio")
        audio_id = _audio_id(audio) if audio is not None else get("audio_id")
        function_call = get("function_call")
        if function_call is not None:
            function_call = _legacy_call(function_call)
        instructions = get("instructions")
        if (
            cls is not Message
            or metadata is not None
            or instructions is not None
            or role not in _ROLE_SET
            or (content is not None and content.__class__ is not str)
            or (role == "tool" and not (isinstance(tool_call_id, str) and tool_call_id))
        ):
            # The constructor validates and raises the error that says what is wrong.
            return cls(
                role=role,
                content=content,
                tool_calls=calls,
                tool_call_id=tool_call_id,
                name=get("name"),
                reasoning=reasoning,
                reasoning_items=items,
                reasoning_format=fmt,
                refusal=get("refusal"),
                audio_id=audio_id,
                function_call=function_call,
                instructions=instructions,
                metadata=metadata,
            )
        # What __post_init__ checks holds here, so the value is built through its slots,
        # skipping the frozen dataclass __init__ (about half the cost of a message).
        message: Message = _new(Message)
        _set_role(message, role)
        _set_content(message, content)
        _set_tool_calls(message, calls)
        _set_tool_call_id(message, tool_call_id)
        _set_name(message, get("name"))
        _set_reasoning(message, reasoning)
        _set_reasoning_items(message, items)
        _set_reasoning_format(message, fmt)
        _set_refusal(message, get("refusal"))
        _set_audio_id(message, audio_id)
        _set_function_call(message, function_call)
        for set_default, default in _OTHER_DEFAULTS:
            set_default(message, default())
        _check_fields(message)
        return message

    def to_dict(self) -> dict[str, Any]:
        """Return the message as a JSON-ready dict (the inverse of :meth:`from_dict`).

        The shape is OpenAI chat's (``role``, ``content``, ``tool_calls`` as
        ``{id, type, function: {name, arguments}}``, ``tool_call_id``, ``name``) plus
        ``reasoning`` (text), ``reasoning_items`` (the provider's opaque items, verbatim),
        ``reasoning_format``, Chat's ``refusal``, ``audio`` (``{"id": audio_id}``) and
        ``function_call`` (``{"name", "arguments"}``), ``instructions`` and ``metadata``;
        fields that are unset are left out, except ``content``. Content parts and reasoning
        items are copied, not re-encoded, so a signature or encrypted blob comes back byte
        for byte.
        """
        out: dict[str, Any] = {"role": self.role, "content": _copied(self.content)}
        if self.tool_calls:
            out["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        if self.reasoning is not None:
            out["reasoning"] = self.reasoning
        if self.reasoning_items:
            out["reasoning_items"] = [_copied(item) for item in self.reasoning_items]
        if self.reasoning_format is not None:
            out["reasoning_format"] = self.reasoning_format
        if self.refusal is not None:
            out["refusal"] = self.refusal
        if self.audio_id is not None:
            out["audio"] = {"id": self.audio_id}
        if self.function_call is not None:
            out["function_call"] = self.function_call.to_openai()["function"]
        if self.instructions is not None:
            out["instructions"] = _copied(self.instructions)
        if self.metadata is not None:
            out["metadata"] = self.metadata.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """Build a message from :meth:`to_dict`'s shape (a saved conversation's line).

        Stricter than :meth:`coerce`: only the keys :meth:`to_dict` writes are accepted, so a
        misspelt or foreign field is an error instead of being dropped silently.

        Raises:
            ValueError: for a non-dict, an unknown key, or a malformed field (see
                :meth:`coerce` and :meth:`MessageMetadata.from_dict`).
        """
        if not isinstance(data, Mapping):
            raise InvalidInputError(f"a saved message must be a dict; got {type(data).__name__}")
        unknown = sorted(set(data) - _DICT_KEYS)
        if unknown:
            raise InvalidInputError(
                f"unknown message keys {unknown}; accepted: {sorted(_DICT_KEYS)}"
            )
        if data.get("reasoning") is not None and not isinstance(data["reasoning"], str):
            raise InvalidInputError("a saved message's reasoning must be a string")
        items = data.get("reasoning_items") or ()
        if not isinstance(items, list | tuple) or not all(isinstance(i, Mapping) for i in items):
            raise InvalidInputError("a saved message's reasoning_items must be a list of dicts")
        raw_calls = data.get("tool_calls") or ()
        if not isinstance(raw_calls, list | tuple):
            raise InvalidInputError("a saved message's tool_calls must be a list of tool calls")
        audio, function_call = data.get("audio"), data.get("function_call")
        return cls(
            role=str(data.get("role")),
            content=data.get("content"),
            tool_calls=tuple(ToolCall.from_openai(_mapping(c, "tool call")) for c in raw_calls),
            tool_call_id=data.get("tool_call_id"),
            name=data.get("name"),
            reasoning=data.get("reasoning"),
            reasoning_items=tuple(items),
            reasoning_format=data.get("reasoning_format"),
            refusal=data.get("refusal"),
            audio_id=_audio_id(audio) if audio is not None else None,
            function_call=_legacy_call(function_call) if function_call is not None else None,
            instructions=data.get("instructions"),
            metadata=data.get("metadata"),
        )

    def with_(self, **changes: Any) -> Message:
        """Return a copy with the fields named in ``changes`` replaced, checked as a new
        message is (``message.with_(content=redacted)``); what was derived from this value
        for a wire or a cache key is not carried over.

        Raises:
            TypeError: for a name that is not a field of :class:`Message`.
            ValueError: for a value a message does not accept.
        """
        return dataclasses.replace(self, **changes)

    def text(self) -> str:
        """Return the text of ``content``: the string itself, or the joined ``text`` parts."""
        if isinstance(self.content, str):
            return self.content
        if not self.content:
            return ""
        return "".join(str(p.get("text", "")) for p in self.content if isinstance(p, Mapping))


_ROLES = ("system", "developer", "user", "assistant", "tool")
_ROLE_SET = frozenset(_ROLES)
_new = object.__new__


def _tool_call(value: Any) -> ToolCall:
    """A ``ToolCall`` from a ``ToolCall`` or an OpenAI ``tool_calls[]`` entry."""
    if value.__class__ is dict:
        function = value.get("function")
        if function.__class__ is dict:
            name = function.get("name")
            arguments = function.get("arguments", "{}")
            if name.__class__ is str and name and arguments.__class__ is str:
                # The common shape, built through the slots (as ``from_openai`` would).
                fill: Any = _new(_ToolCallSlots)
                fill.id = str(value.get("id") or "")
                fill.name = name
                fill.arguments = arguments
                fill.__class__ = cast(Any, ToolCall)
                call: ToolCall = fill
                return call
    if isinstance(value, ToolCall):
        return value
    return ToolCall.from_openai(_mapping(value, "tool call"))


def _slot(name: str, cls: type = Message) -> Callable[[Any, Any], None]:
    setter: Callable[[Any, Any], None] = vars(cls)[name].__set__
    return setter


def _default_of(spec: dataclasses.Field[Any]) -> Callable[[], Any]:
    if spec.default_factory is not dataclasses.MISSING:
        return spec.default_factory
    value = spec.default
    return lambda: value


_set_role = _slot("role")
_set_content = _slot("content")
_set_tool_calls = _slot("tool_calls")
_set_tool_call_id = _slot("tool_call_id")
_set_name = _slot("name")
_set_reasoning = _slot("reasoning")
_set_reasoning_items = _slot("reasoning_items")
_set_reasoning_format = _slot("reasoning_format")
_set_refusal = _slot("refusal")
_set_audio_id = _slot("audio_id")
_set_function_call = _slot("function_call")
_DICT_KEYS = frozenset(
    {
        "role",
        "content",
        "tool_calls",
        "tool_call_id",
        "name",
        "reasoning",
        "reasoning_items",
        "reasoning_format",
        "refusal",
        "audio",
        "function_call",
        "instructions",
        "metadata",
    }
)


def _audio_id(value: Any) -> str:
    """The id of Chat's assistant ``audio`` object (``{"id": "audio_..."}``)."""
    if not isinstance(value, Mapping) or not isinstance(value.get("id"), str) or not value["id"]:
        raise InvalidInputError(
            "an assistant message's audio must be {'id': '<id of a previous audio answer>'} "
            f"(OpenAI Chat's assistant audio); got {value!r}"
        )
    return str(value["id"])


def _legacy_call(value: Any) -> ToolCall:
    """Chat's legacy assistant ``function_call`` (``{"name", "arguments"}``, both strings,
    both required) as a :class:`ToolCall` with an empty id."""
    if isinstance(value, ToolCall):
        return value
    name = value.get("name") if isinstance(value, Mapping) else None
    arguments = value.get("arguments") if isinstance(value, Mapping) else None
    if not (isinstance(name, str) and name and isinstance(arguments, str)):
        raise InvalidInputError(
            "an assistant message's function_call must be {'name': '...', 'arguments': "
            f"'<JSON text>'}} (OpenAI Chat's legacy function call); got {value!r}"
        )
    return ToolCall(id="", name=name, arguments=arguments)


def _copied(value: Any) -> Any:
    """A copy of JSON-shaped data: dicts and lists copied at every depth, leaves shared."""
    if isinstance(value, Mapping):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_copied(item) for item in value]
    return value


_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_TOOL_KEYS = frozenset({"type", "function", "name", "description", "parameters", "strict"})
# The keys of OpenAI's ChatCompletionRequest{System,Developer,User,Assistant,Tool}Message
# (openai OpenAPI document, 2026-11-28), the reasoning keys other wires put on assistant
# turns, and every field of Message itself.
_MESSAGE_KEYS = frozenset(
    {
        "role",
        "content",
        "name",
        "refusal",
        "audio",
        "function_call",
        "tool_calls",
        "tool_call_id",
        "reasoning_content",
        "reasoning_details",
        *(f.name for f in dataclasses.fields(Message) if f.init),
    }
)
MESSAGE_KEYS = _MESSAGE_KEYS
"""The keys :meth:`Message.coerce` takes in a message dict (any other is refused)."""
_NEEDS_CONTENT = frozenset({"system", "developer", "user", "tool"})
_ASSISTANT_OUTPUT = (
    "tool_calls",
    "function_call",
    "refusal",
    "audio",
    "reasoning",
    "reasoning_content",
    "reasoning_details",
    "reasoning_items",
)
_COERCED = frozenset(
    {
        "role",
        "content",
        "tool_calls",
        "tool_call_id",
        "name",
        "reasoning",
        "reasoning_items",
        "reasoning_format",
        "refusal",
        "audio_id",
        "function_call",
    }
)
_OTHER_DEFAULTS: tuple[tuple[Callable[[Message, Any], None], Callable[[], Any]], ...] = tuple(
    (_slot(f.name), _default_of(f)) for f in dataclasses.fields(Message) if f.name not in _COERCED
)
"""Every other field (the memo, metadata, any field added later) with its default."""


class _MessageSlots:
    """The slots of :class:`Message` without the frozen ``__setattr__``: the fast path of
    :meth:`Message.coerce` fills one with plain attribute stores, then makes it a
    ``Message`` (the same layout, so ``__class__`` may change), in about a third of the
    time of the slot descriptors' ``__set__`` calls."""

    __slots__ = Message.__slots__


class _ToolCallSlots:
    """The slots of :class:`ToolCall`, filled the same way (see :class:`_MessageSlots`)."""

    __slots__ = ToolCall.__slots__


_PLAIN_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id", "name"})
"""The keys of the dicts the fast path of :meth:`Message.coerce` takes."""
_LATER_DEFAULTS: tuple[tuple[str, Callable[[], Any]], ...] = tuple(
    (f.name, _default_of(f))
    for f in dataclasses.fields(Message)
    if f.name not in _COERCED and f.name not in ("metadata", "_memo")
)
"""Fields added after those the fast path sets, with their defaults."""


# -- the errors a value raises ----------------------------------------------------------------

_MAX_BODY_CHARS = 2000


class PolythinkError(Exception):
    """Base class of every error polythink raises on purpose.

    Defined here, with :class:`InvalidInputError`, so the value types can raise it when a
    value is built from bad input; it is :class:`polythink.errors.PolythinkError` (its
    ``__module__`` says so), the root of the taxonomy in :mod:`polythink.errors`.

    Attributes (all optional; ``None`` when not applicable or not known):
        provider: provider id of the source that failed (``"openai"``, ``"anthropic"``, ...).
        source_index: position of that source in ``Client(sources=[...])``.
        status_code: HTTP status; in-band stream errors keep the stream's 200.
        error_type: the provider's error type or code (``"rate_limit_error"``,
            ``"unsupported_value"``, ...) when it is an identifier holding no key, else
            ``"http_<status>"`` (the provider's is then in ``body``).
        request_id: the provider's request id header, for support tickets (redacted).
        retry_after: seconds the server asked to wait (from ``retry-after-ms``, or
            ``retry-after`` as seconds or an HTTP date); ``math.inf`` for a value too large
            to represent.
        should_retry: ``True``/``False`` when the server's ``x-should-retry`` header said so,
            or ``False`` when polythink knows a retry cannot help (quota exhausted, a URL
            or header the HTTP layer refuses to send); ``None`` otherwise. It overrides the
            status rule of the retry layer.
        body: the response body, redacted and truncated to 2000 characters.
        attempts: upstream calls made to this source for this error (set by the retry
            layer; ``None`` when no retry layer saw it).
        previous: errors of sources tried earlier in the same call (failover), oldest first.
        rate_limit: the rate-limit state the provider's headers reported with the error.
    """

    __module__ = "polythink.errors"

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        source_index: int | None = None,
        status_code: int | None = None,
        error_type: str | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
        should_retry: bool | None = None,
        body: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.source_index = source_index
        self.status_code = status_code
        self.error_type = error_type
        self.request_id = request_id
        self.retry_after = retry_after
        self.should_retry = should_retry
        self.body = body[:_MAX_BODY_CHARS] if body is not None else None
        self.attempts: int | None = None
        self.previous: list[PolythinkError] = []
        self.rate_limit: RateLimit | None = None

    def __str__(self) -> str:
        parts = [self.message]
        details = [
            f"{name}={value}"
            for name, value in (
                ("provider", self.provider),
                ("source", self.source_index),
                ("status", self.status_code),
                ("type", self.error_type),
                ("request_id", self.request_id),
            )
            if value is not None
        ]
        if self.retry_after is not None:
            details.append(f"retry_after={self.retry_after:.1f} s")
        if details:
            parts.append("(" + ", ".join(details) + ")")
        return " ".join(parts)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"


class InvalidInputError(PolythinkError, ValueError):
    """What the caller gave polythink is not accepted: a value, a message, a tool, a source, a
    configuration file, an argument. Nothing was sent.

    The message names what was wrong and what is accepted. It is a ``ValueError`` too, so
    ``except ValueError`` keeps working; the same input fails the same way on every source, so
    neither retry nor failover acts on it.
    """

    __module__ = "polythink.errors"


# -- checks of what a message carries --------------------------------------------------------

_SURROGATE = re.compile("[\ud800-\udfff]")

CONTENT_PARTS: Mapping[str, str] = {
    "text": "{'type': 'text', 'text': '...'}",
    "image_url": "{'type': 'image_url', 'image_url': {'url': 'https://... or data:...'}}",
    "input_audio": (
        "{'type': 'input_audio', 'input_audio': {'data': '<base64>', 'format': 'wav'}}"
    ),
    "file": "{'type': 'file', 'file': {'file_data': 'data:...' or 'file_id': '...'}}",
    "refusal": "{'type': 'refusal', 'refusal': '...'}",
}
"""The content parts every wire reads the same way: OpenAI Chat's
``ChatCompletionRequest{User,Assistant}MessageContentPart`` (openai OpenAPI document,
2026-11-28, ``../shared/wire/specs``), each with its required keys. A part of another
``type`` is a wire's own block (Anthropic ``document``, Responses ``input_file`` …): its
transport checks whether it carries it."""


def check_text(text: str, where: str) -> None:
    """Refuse ``text`` holding a lone surrogate (it cannot be encoded as UTF-8).

    O(1) for ASCII text (CPython keeps that flag on the string), one scan otherwise.

    Raises:
        ValueError: naming ``where``, the code point and its character offset.
    """
    if text.isascii():
        return
    found = _SURROGATE.search(text)
    if found is not None:
        raise InvalidInputError(
            f"{where} holds a lone surrogate U+{ord(found.group()):04X} at character "
            f"{found.start()}: text must be valid Unicode (UTF-8 encodable); it usually comes "
            "from bytes decoded with errors='surrogateescape' or a cut UTF-16 pair"
        )


def _part_problem(kind: str, part: Mapping[str, Any]) -> str | None:
    """What is wrong with a part of one of the :data:`CONTENT_PARTS` types, or ``None``."""
    if kind in ("text", "refusal"):
        return None if isinstance(part.get(kind), str) else f"has no {kind!r} string"
    value = part.get(kind)
    if kind == "image_url":
        url = value.get("url") if isinstance(value, Mapping) else value
        return None if isinstance(url, str) and url else "has no 'image_url' with a 'url'"
    if not isinstance(value, Mapping):
        return f"has no {kind!r} object"
    if kind == "input_audio":
        if isinstance(value.get("data"), str) and isinstance(value.get("format"), str):
            return None
        return "needs 'input_audio' with 'data' (base64) and 'format' strings"
    if any(isinstance(value.get(k), str) and value.get(k) for k in ("file_data", "file_id")):
        return None
    return "needs 'file' with a 'file_data' or 'file_id' string"


def check_part(part: Any, index: int, role: str) -> None:
    """Check one content part of a ``role`` message, at ``index`` in its content list.

    A part is a dict with a ``type``; one of the :data:`CONTENT_PARTS` types must have its
    required keys (``{"type": "text", "txt": ...}`` would reach the provider as an empty
    text, so it is refused), and its text no lone surrogate. A part of another type is left
    to the wire of each source, which refuses a type it cannot carry before sending.

    Raises:
        ValueError: naming the part's index, what was wrong and what is accepted.
    """
    where = f"{role} message content part {index}"
    if not isinstance(part, Mapping):
        raise InvalidInputError(
            f"{where} must be a dict with a 'type'; got {type(part).__name__}; accepted: "
            + "; ".join(CONTENT_PARTS.values())
        )
    kind = part.get("type")
    if not isinstance(kind, str) or not kind:
        keys = ", ".join(sorted(map(str, part))) or "none"
        raise InvalidInputError(
            f"{where} has no 'type' string (keys: {keys}); accepted types: "
            f"{', '.join(CONTENT_PARTS)}, or a block type of the provider's own wire"
        )
    if kind not in CONTENT_PARTS:
        return
    problem = _part_problem(kind, part)
    if problem is not None:
        keys = ", ".join(sorted(map(str, part)))
        raise InvalidInputError(
            f"{where} ({kind}) {problem} (keys: {keys}); accepted: {CONTENT_PARTS[kind]}"
        )
    if kind in ("text", "refusal"):
        check_text(part[kind], f"{where} ({kind})")


def check_content(role: str, content: Any) -> None:
    """Check the ``content`` of a ``role`` message: a string without lone surrogates, or a
    non-empty list of parts (:func:`check_part`); ``None`` is left to the caller.

    Raises:
        ValueError: naming the field and, for a part, its index.
    """
    if content.__class__ is str:
        check_text(content, f"{role} message content")
        return
    if not isinstance(content, list):
        return
    if not content and role in _NEEDS_CONTENT:
        raise InvalidInputError(
            f"{role} message has no content: its content list is empty; it needs a string "
            "or at least one content part"
        )
    search = _SURROGATE.search
    for index, part in enumerate(content):
        if part.__class__ is dict and part.get("type") == "text":
            # The common part, checked inline (a third of the cost of the general check).
            text = part.get("text")
            if text.__class__ is str and (text.isascii() or search(text) is None):
                continue
        check_part(part, index, role)


def _check_message(message: Message) -> None:
    """What the constructor checks of a message's fields: content present (or, on an
    assistant turn, some output), then :func:`_check_fields`."""
    role = message.role
    if message.content is None and (
        role in _NEEDS_CONTENT
        or not (
            message.tool_calls
            or message.reasoning
            or message.reasoning_items
            or message.refusal
            or message.audio_id
            or message.function_call
        )
    ):
        needs = (
            ""
            if role in _NEEDS_CONTENT
            else ", or tool_calls, reasoning, reasoning_items, refusal, audio_id or function_call"
        )
        raise InvalidInputError(
            f"{role} message has no content: it needs 'content' (a string or a list of "
            f"content parts){needs}"
        )
    _check_fields(message)


def _check_fields(message: Message) -> None:
    """The checks :meth:`Message.coerce` adds to its own: the content's parts, a string
    ``name``, Chat's ``refusal``, ``audio`` and ``function_call`` on assistant turns only,
    and valid Unicode in every text a provider receives."""
    role = message.role
    if message.content is not None:
        check_content(role, message.content)
    for call in message.tool_calls:
        check_text(call.arguments, f"{role} message tool call {call.id!r} arguments")
    if message.reasoning is not None:
        check_text(message.reasoning, f"{role} message reasoning")
    if message.tool_call_id is not None and role != "tool":
        raise InvalidInputError(
            f"{role} message has tool_call_id {message.tool_call_id!r}: only a tool message "
            "answers a call"
        )
    name = message.name
    if name is not None:
        if name.__class__ is not str and not isinstance(name, str):
            raise InvalidInputError(
                f"{role} message name must be a string (it tells participants apart); got "
                f"{type(name).__name__} {name!r}"
            )
        check_text(name, f"{role} message name")
    if message.instructions is not None:
        _check_instructions(message)
    if message.refusal is None and message.audio_id is None and message.function_call is None:
        return
    if role != "assistant":
        raise InvalidInputError(
            f"{role} message has refusal, audio or function_call: they belong to assistant "
            "messages (OpenAI Chat's ChatCompletionRequestAssistantMessage)"
        )
    if message.refusal is not None:
        if not isinstance(message.refusal, str):
            raise InvalidInputError(
                f"assistant message refusal must be a string; got {message.refusal!r}"
            )
        check_text(message.refusal, "assistant message refusal")
    if message.audio_id is not None and not (
        isinstance(message.audio_id, str) and message.audio_id
    ):
        raise InvalidInputError(
            f"assistant message audio_id must be a string; got {message.audio_id!r}"
        )
    if message.function_call is not None:
        check_text(message.function_call.arguments, "assistant message function_call arguments")


def _check_instructions(message: Message) -> None:
    """``instructions``: on an assistant turn, a message of the provider's shape (a dict
    with a ``role`` of ``system`` or ``user`` and its ``content``)."""
    given = message.instructions
    if message.role != "assistant":
        raise InvalidInputError(
            f"{message.role} message has instructions: they belong to the assistant turn "
            "they were sent before"
        )
    if (
        not isinstance(given, Mapping)
        or given.get("role") not in ("system", "user")
        or not isinstance(given.get("content"), str | list)
    ):
        raise InvalidInputError(
            "assistant message instructions must be the message that carried them, "
            "{'role': 'system' or 'user', 'content': ...} (as polythink returned it); "
            f"got {given!r}"
        )


def check_json(value: Any, where: str) -> None:
    """Refuse a value a request body cannot carry: one JSON cannot represent.

    The test is the one the transports' body encoder applies (orjson, then ``json`` for what
    orjson refuses), so a value that passes here is sent as it is.

    Raises:
        ValueError: naming ``where``, the path to the first value JSON cannot represent and
            its type (never the value itself: it may be a credential), or to the first
            string, key or value, holding a lone surrogate (UTF-8 cannot encode it).
    """
    try:
        encoded = orjson.dumps(value)
    except TypeError:
        pass
    else:
        # orjson writes NaN and the infinities as null: a null in the output may be one.
        if b"null" in encoded:
            _refuse_non_finite(value, where)
        return
    try:
        json.dumps(value, allow_nan=False)
    except ValueError as exc:  # a circular reference
        path, kind, reason = "", "", f"cannot be written as JSON ({exc})"
    except TypeError:
        path, kind = _unencodable(value)
        reason = "cannot be written as JSON"
    else:
        # orjson refuses a lone surrogate and ``json`` escapes it; the body encoder cannot.
        _refuse_surrogates(value, where)
        return
    if kind:
        hint = " (give a list)" if kind in ("set", "frozenset") else ""
        reason = f"is of type {kind}, which JSON cannot represent{hint}"
    raise InvalidInputError(
        f"{where}{path} {reason}; a request body holds dicts with string keys, lists, "
        "strings, numbers, booleans and None"
    )


def _refuse_surrogates(value: Any, where: str, path: str = "") -> None:
    """Raise ``ValueError`` (:func:`check_text`) naming the path to the first string in
    ``value``, a key or a value, that holds a lone surrogate."""
    if isinstance(value, str):
        check_text(value, f"{where}{path}")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str):
                check_text(key, f"{where}{path} key {key!a}")
            _refuse_surrogates(item, where, f"{path}[{key!a}]")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _refuse_surrogates(item, where, f"{path}[{i}]")


def _refuse_non_finite(value: Any, where: str, path: str = "") -> None:
    """Raise ``ValueError`` naming the first NaN or infinity in ``value`` (JSON has neither;
    sent, it would reach the provider as ``null``)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInputError(
            f"{where}{path} is {value!r}, which JSON cannot represent (it would be sent as "
            "null); give a finite number, or None"
        )
    if isinstance(value, Mapping):
        for key, item in value.items():
            _refuse_non_finite(item, where, f"{path}[{key!r}]")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _refuse_non_finite(item, where, f"{path}[{i}]")


def _unencodable(value: Any, path: str = "") -> tuple[str, str]:
    """The path (``['a'][0]``) and type name of the first value in ``value`` JSON cannot
    represent."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str | int | float | bool) and key is not None:
                return f"{path} has a key that", type(key).__name__
            found = _unencodable(item, f"{path}[{key!r}]")
            if found[1]:
                return found
        return path, ""
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = _unencodable(item, f"{path}[{i}]")
            if found[1]:
                return found
        return path, ""
    if value is None or isinstance(value, str | int | float | bool):
        return path, ""
    return path, type(value).__name__


KEY_SHAPES = re.compile(
    r"(sk-[A-Za-z0-9_\-]{8,}|sk_[A-Za-z0-9_\-]{8,}|AIza[0-9A-Za-z_\-]{20,}"
    r"|(?i:bearer)\s+[A-Za-z0-9._\-~+/=]{8,}|xai-[A-Za-z0-9]{8,}|gsk_[A-Za-z0-9]{8,}"
    r"|ya29\.[A-Za-z0-9._\-]{16,}|bedrock-api-key-[A-Za-z0-9+/=]{16,}"
    r"|QmVkcm9ja0FQSUtleS[A-Za-z0-9+/=]{8,}|Signature=[0-9a-f]{64})"
)
"""Text shaped like a provider key: ``sk-…``, ``sk_…``, ``AIza…``, ``Bearer …``, ``xai-…``,
``gsk_…``; a Google OAuth access token (``ya29.…``); a Bedrock API key (short-term
``bedrock-api-key-…``, long-term base64 of ``BedrockAPIKey-…``: CLOUDS.md §1.10); a SigV4
``Signature=…``."""

_CREDENTIAL_WORD = re.compile(
    r"(?:^|_)(?:api_?key|key|token|secret|password|passwd|credentials?|auth|authorization"
    r"|cookie|bearer)(?:_|$)"
)


def credential_name(name: str) -> bool:
    """Whether a field called ``name`` holds a credential: one of its words (split at
    ``_``, ``-``, ``.``, spaces and camelCase) is key, apikey, token, secret, password,
    credential(s), auth(orization), cookie or bearer. ``api_key``, ``x-api-key``,
    ``accessToken`` do; ``max_tokens``, ``keywords`` do not."""
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()
    return _CREDENTIAL_WORD.search(re.sub(r"[^a-z0-9]+", "_", words)) is not None


def redacted(value: Any, secrets: Sequence[str | None] = ()) -> Any:
    """A copy of JSON-shaped ``value`` fit to show (``repr``): the value of every key
    :func:`credential_name` names, and every string that holds one of ``secrets`` or is
    shaped like a provider key (:data:`KEY_SHAPES`), become ``"[REDACTED]"``."""
    if isinstance(value, Mapping):
        return {
            key: "[REDACTED]"
            if isinstance(key, str) and credential_name(key)
            else redacted(item, secrets)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redacted(item, secrets) for item in value]
    if isinstance(value, str) and (
        KEY_SHAPES.search(value) or any(s and len(s) >= 4 and s in value for s in secrets)
    ):
        return "[REDACTED]"
    return value


def fields_repr(obj: Any, **shown: Any) -> str:
    """``ClassName(field=value, ...)`` over the dataclass fields of ``obj`` that are in its
    ``repr``, as the dataclass writes it, with the values in ``shown`` in place of the
    fields' own."""
    parts = (
        f"{f.name}={shown[f.name] if f.name in shown else getattr(obj, f.name)!r}"
        for f in dataclasses.fields(obj)
        if f.repr
    )
    return f"{type(obj).__qualname__}({', '.join(parts)})"


def _mapping(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"a {what} must be a dict; got {type(value).__name__}")
    return value


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one exchange. ``None`` means the provider did not say, never 0.

    - ``input_tokens``: every prompt token the model saw, cached ones included (Anthropic
      reports uncached only; its transport adds cache reads and writes).
    - ``output_tokens``: every generated token, reasoning included.
    - ``reasoning_tokens``: the reasoning part of ``output_tokens``.
    - ``cache_read_tokens`` / ``cache_write_tokens``: the cached parts of ``input_tokens``.
    - ``cache_write_1h_tokens``: the part of ``cache_write_tokens`` written to a 1-hour cache
      (Anthropic's ``cache_creation.ephemeral_1h_input_tokens``), priced above the 5-minute
      writes (2x the input price, against 1.25x).
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cache_write_1h_tokens: int | None = None

    @property
    def total_tokens(self) -> int | None:
        """``input_tokens + output_tokens`` when both are known, else ``None``."""
        if self.input_tokens is None or self.output_tokens is None:
            return None
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True, kw_only=True)
class Cost:
    """What one call cost, in US dollars.

    - ``input``: the uncached prompt tokens.
    - ``cache_read`` / ``cache_write``: the prompt tokens read from / written to the
      provider's prompt cache.
    - ``output``: every generated token, reasoning included (reasoning tokens are output
      tokens and are billed as such).
    - ``reasoning``: the part of ``output`` spent reasoning, for dashboards; never added on
      top of ``output``.
    - ``total``: what the call cost: the parts added up when priced from a table, the
      provider's own figure when it billed the call itself.
    - ``source``: ``"provider"`` when the provider reported the billed amount (OpenRouter's
      ``usage.cost``), else the price table and its version (``"genai-prices 0.2.3"``).

    A part is ``None`` when it is not known on its own: the provider did not report that
    count (``reasoning`` without reasoning tokens), the price table does not price it apart
    (cache reads of a model without a cache price are billed, and counted, in ``input``), or
    the provider reported only its total, or only a prompt / completion split (then
    ``input`` is the whole prompt part, cached tokens included). ``total`` is always set;
    with a per-request fee it is more than the sum of the parts.
    """

    total: float
    input: float | None = None
    cache_read: float | None = None
    cache_write: float | None = None
    output: float | None = None
    reasoning: float | None = None
    source: str = ""


@dataclass(frozen=True, slots=True)
class RateLimit:
    """The rate-limit state a provider reported in the headers of one answer.

    Read from OpenAI's ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` and
    Anthropic's ``anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}`` (the
    ``tokens`` family is "the most restrictive limit currently in effect"); sources and
    formats in WIRE.md §8.1-8.2. ``None`` means the header was absent or unusable (Azure has
    been seen sending ``-1``).

    - ``*_limit``: the provider's limit per minute (requests, or tokens).
    - ``*_remaining``: what is left of it now.
    - ``*_reset``: seconds from the answer until the budget is fully replenished (OpenAI
      sends a Go duration such as ``6m0s``, Anthropic an RFC 3339 instant; both become
      seconds here). It is not the wait for the next unit, which is usually shorter.
    """

    requests_limit: int | None = None
    requests_remaining: int | None = None
    requests_reset: float | None = None
    tokens_limit: int | None = None
    tokens_remaining: int | None = None
    tokens_reset: float | None = None


@dataclass(frozen=True, slots=True)
class Resolution:
    """The outcome of resolving a requested effort for one source's model.

    - ``requested_effort``: what the caller asked (``None`` = unset).
    - ``applied_effort``: the tier actually put on the wire (differs after nearest-mapping;
      ``None`` when nothing was injected because the request was unset).
    - ``payload``: the request-body fragment, deep-merged into the body by the transport
      (it may also carry the raised output ceiling of budget wires).
    - ``budget_tokens``: the reasoning budget in tokens for budget wires, else ``None``.
    - ``warnings``: human-readable notes (nearest-mapping, unregistered model).
    - ``stream_only``: the provider answers this call only when it is streamed (reasoning on
      a model the provider serves that way), so ``complete()`` streams under the hood.
    """

    requested_effort: Effort | None
    applied_effort: Effort | None
    payload: Mapping[str, Any]
    budget_tokens: int | None = None
    warnings: tuple[str, ...] = ()
    stream_only: bool = False


@dataclass(frozen=True, slots=True)
class TierResolution:
    """The outcome of resolving a requested service tier for one source's model.

    - ``requested``: what the caller asked (``None`` = unset).
    - ``applied``: the tier put on the wire (differs after nearest-mapping; ``None`` when
      nothing is sent: unset, dropped, or a provider without tiers).
    - ``body``: the request-body fragment the transport merges (``{"service_tier": "flex"}``).
    - ``headers``: HTTP headers the transport adds (Vertex AI spells the tier as a header).
    - ``fallback``: the tier to send the call again at, once, when the provider answers that
      ``applied`` has no capacity (:class:`~polythink.errors.CapacityUnavailableError`);
      ``None``: raise that error instead (it is retried like any transient error).
    - ``warnings``: human-readable notes (nearest-mapping, a provider without tiers).
    """

    requested: ServiceTier | None
    applied: ServiceTier | None
    body: Mapping[str, Any] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    fallback: ServiceTier | None = None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class StepDown:
    """Why a call was sent cheaper than it asked: a spend budget ran low (see
    :class:`polythink.Budget`, ``step_down_at`` and ``flex_at``).

    - ``requested``: the reasoning tier the model would have applied without the budget (the
      caller's tier after nearest-mapping, or the model's default tier for an unset one);
      ``None`` when the call has none (a model that does not reason, moved to flex only).
    - ``applied``: the reasoning tier sent instead (the same as ``requested`` when only the
      service tier changed).
    - ``reason``: why; ``"budget"``.
    - ``budget``: the name of the budget that decided (the tightest of those that apply).
    - ``spent``: the fraction of that budget spent when the call was admitted (0.85 = 85 %).
    - ``step_down_at``: the fraction from which that budget steps reasoning tiers down
      (``None``: it does not; it only moves calls to flex).
    - ``max_tokens``: the output ceiling in tokens the call was sent with when the step
      shrank it, else ``None``.
    - ``service_tier``: the service tier the budget moved the call to (``flex``), else
      ``None``.
    - ``flex_at``: the fraction from which that budget moves calls to flex, when it did.
    """

    requested: Effort | None
    applied: Effort | None
    reason: str = "budget"
    budget: str
    spent: float
    step_down_at: float | None
    max_tokens: int | None = None
    service_tier: ServiceTier | None = None
    flex_at: float | None = None


_RETENTIONS = ("in_memory", "24h")
_TTLS = ("5m", "1h")
_BREAKPOINTS = ("auto", "explicit")


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptCache:
    """Ask the provider to cache the conversation's prefix; each wire translates it.

    Providers cache a prompt's prefix (tools, system prompt, earlier turns) so the next call
    that starts the same way reads it back at a fraction of the price. What to send:

    - Anthropic (and OpenRouter to the providers behind it): a ``cache_control``
      ``{"type": "ephemeral"}`` breakpoint. ``breakpoints="auto"`` sends it once at the top
      of the body, where the API places it on the last cacheable block itself;
      ``"explicit"`` puts it on the last system block and on the last block of the last
      message instead (for deployments without the top-level form). ``ttl`` is ``5m``
      (Anthropic's default) or ``1h``. Facts: ANT-DOC-caching (WIRE.md §3.5, §10), the
      ``CacheControlEphemeral`` schema in
      ``../shared/wire/specs/anthropic_messages_openapi_docs_copy.md`` (2025-09); the
      top-level form as OpenRouter documents it for Anthropic models
      (openrouter.ai/docs, ``AnthropicCacheControlDirective``, read 2026-12-01).
    - OpenAI Chat Completions and Responses (and OpenRouter): ``prompt_cache_key`` (``key``,
      at most 64 characters: calls that share it are routed to the same cache) and
      ``prompt_cache_retention`` (``retention``: ``in_memory`` or ``24h``); both from
      ``../shared/wire/specs/openai_openapi.yaml`` (2026-08-21). OpenAI caches prefixes
      on its own, so without them nothing is sent. ``breakpoints="explicit"`` on gpt-5.6
      and later sends ``prompt_cache_options`` and ``prompt_cache_breakpoint`` on the
      stable system prompt's last part and the last message's.
    - Gemini caches implicitly and has no per-request marker: nothing is sent.

    ``ttl="1h"`` is sent only where a ``cache_control`` carries it (Anthropic, OpenRouter);
    elsewhere the call goes out without it and the response's warnings say so (OpenAI keeps
    a prefix at least 30 minutes, its only ``prompt_cache_options.ttl``).

    A stable system prompt with a per-call ``system_suffix`` keeps the cached prefix
    identical from call to call.

    Raises:
        ValueError: for a ``key`` that is empty or longer than 64 characters, or an unknown
            ``retention``, ``ttl`` or ``breakpoints`` value.
    """

    key: str | None = None
    retention: str | None = None
    ttl: str | None = None
    breakpoints: str = "auto"

    def __post_init__(self) -> None:
        if self.key is not None and not (isinstance(self.key, str) and 0 < len(self.key) <= 64):
            raise InvalidInputError(
                f"PromptCache.key must be a string of 1 to 64 characters; got {self.key!r}"
            )
        if self.retention is not None and self.retention not in _RETENTIONS:
            raise InvalidInputError(
                f"PromptCache.retention must be one of {', '.join(_RETENTIONS)} or None; "
                f"got {self.retention!r}"
            )
        if self.ttl is not None and self.ttl not in _TTLS:
            raise InvalidInputError(
                f"PromptCache.ttl must be one of {', '.join(_TTLS)} or None; got {self.ttl!r}"
            )
        if self.breakpoints not in _BREAKPOINTS:
            raise InvalidInputError(
                f"PromptCache.breakpoints must be one of {', '.join(_BREAKPOINTS)}; "
                f"got {self.breakpoints!r}"
            )

    @classmethod
    def coerce(cls, value: PromptCache | bool | None) -> PromptCache | None:
        """Accept a ``PromptCache``, ``True`` (the defaults), or ``None``/``False`` (off).

        Raises:
            ValueError: for any other value.
        """
        if value is None or value is False:
            return None
        if value is True:
            return cls()
        if isinstance(value, PromptCache):
            return value
        raise InvalidInputError(
            f"prompt_cache must be True, False, None or a PromptCache; got {value!r}"
        )

    def cache_control(self) -> dict[str, str]:
        """The Anthropic ``cache_control`` object for this marker."""
        if self.ttl is None:
            return {"type": "ephemeral"}
        return {"type": "ephemeral", "ttl": self.ttl}


_FORMAT_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_SCHEMA_MARKS = frozenset(
    {"type", "properties", "anyOf", "oneOf", "allOf", "$ref", "enum", "const"}
)
_ACCEPTED_FORMATS = (
    "a pydantic model class, a JSON Schema dict ({'type': 'object', 'properties': ...}), "
    "OpenAI's {'type': 'json_schema', 'json_schema': {'name', 'schema', 'strict'}} (or the "
    "Responses form {'type': 'json_schema', 'name', 'schema', 'strict'}), "
    "{'type': 'json_object'}, a ResponseFormat, or None"
)


def _format_name(candidate: Any) -> str | None:
    """``candidate`` made into a name every wire takes (letters, digits, ``_``, ``-``; at most
    64), or ``None`` when nothing of it is left."""
    if not isinstance(candidate, str):
        return None
    cleaned = re.sub(r"[^a-zA-Z0-9_-]+", "_", candidate.strip()).strip("_")[:64]
    return cleaned or None


@dataclass(frozen=True, slots=True, init=False)
class ResponseFormat(Generic[_OutputT]):
    """What the answer must be: JSON that fits a schema, or any JSON object.

    Build it from what users of the official SDKs already write; the same value works on
    every wire (each transport spells it in its provider's field, see
    :mod:`polythink.transports.schema`):

    - a pydantic model class (``BaseModel`` subclass): its ``model_json_schema()``, and the
      answer is validated into an instance. pydantic is not imported by polythink: the class
      brings it (``pip install 'polythink[pydantic]'``).
    - a JSON Schema dict, bare (``{"type": "object", "properties": ...}``): the answer is the
      decoded JSON.
    - OpenAI's envelope ``{"type": "json_schema", "json_schema": {"name", "schema",
      "strict", "description"}}`` (Chat) or ``{"type": "json_schema", "name", "schema",
      "strict"}`` (Responses); its ``strict`` keeps OpenAI's meaning, false when absent.
    - ``{"type": "json_object"}``: any JSON object, no schema.

    Attributes:
        kind: ``json_schema`` or ``json_object``.
        schema: the JSON Schema as given (``None`` for ``json_object``); read-only.
        name: the schema's name on wires that take one (OpenAI's ``json_schema.name``, the
            output tool of Anthropic's fallback): the one given, else the model class's name
            or the schema's ``title``, else ``response``. 1 to 64 letters, digits, ``_`` or
            ``-``. Anthropic's ``output_config.format`` and Gemini have no field for it.
        description: OpenAI's ``json_schema.description``; on Anthropic, Gemini and in the
            schema quoted by JSON-mode prompts it opens the schema's root ``description``
            (they have no field of their own); ``None`` when not given.
        strict: ``True`` asks for constrained decoding and refuses a source that cannot do
            it; ``False`` sends the schema as guidance where a wire lets the caller choose;
            ``None`` (the default) is strict wherever the source offers it.
        output_type: the pydantic model class, or ``None``.
        key: the canonical JSON of everything above but the class (a cache key's part, and
            the key of the per-wire schema transforms).

    Raises:
        ValueError: for any other value, a bad ``name``, a schema that is not a JSON object
            (or not JSON), a description or schema string holding a lone surrogate, a local
            ``$ref`` (``#/$defs/X``) that names nothing in the schema, or a non-bool
            ``strict``; the message lists what is accepted.
    """

    kind: Literal["json_schema", "json_object"]
    schema: Mapping[str, Any] | None
    name: str
    description: str | None
    strict: bool | None
    output_type: type[_OutputT] | None
    key: str

    def __init__(
        self,
        value: type[_OutputT] | Mapping[str, Any],
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        strict: bool | None = None,
    ) -> None:
        if name is not None and (not isinstance(name, str) or not _FORMAT_NAME.fullmatch(name)):
            raise InvalidInputError(
                f"response_format name {name!r} is refused by providers: use 1 to 64 letters, "
                "digits, '_' or '-' (OpenAI's json_schema.name)"
            )
        if description is not None and not isinstance(description, str):
            raise InvalidInputError(
                f"response_format description must be a string; got {description!r}"
            )
        if strict is not None and not isinstance(strict, bool):
            raise InvalidInputError(
                f"response_format strict must be a bool or None; got {strict!r}"
            )
        kind: Literal["json_schema", "json_object"] = "json_schema"
        output_type: Any = None
        schema: Mapping[str, Any] | None
        default_name: Any
        if isinstance(value, type):
            output_type = value
            schema, default_name = _model_schema(value)
        elif isinstance(value, Mapping):
            kind, schema, given = _schema_of(value)
            name = name or cast("str | None", given.get("name"))
            if description is None:
                description = given.get("description")
            if strict is None:
                strict = given.get("strict")
            default_name = schema.get("title") if schema is not None else None
        else:
            raise InvalidInputError(f"response_format must be {_ACCEPTED_FORMATS}; got {value!r}")
        if schema is not None and not (
            isinstance(schema.get("type"), str | list) or _SCHEMA_MARKS & schema.keys()
        ):
            raise InvalidInputError(
                "response_format schema must be a JSON Schema (with 'type', 'properties', "
                f"'anyOf', '$ref', 'enum' or 'const'); got {dict(schema)!r}. Accepted: "
                f"{_ACCEPTED_FORMATS}"
            )
        if schema is not None:
            _check_refs(schema, schema, "")
        resolved = name or _format_name(default_name) or "response"
        try:
            key = json.dumps(
                [kind, schema, resolved, description, strict],
                sort_keys=True,
                separators=(",", ":"),
                ensure_ascii=False,
                allow_nan=False,
            )
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"response_format schema must be plain JSON: {exc}") from None
        if not key.isascii():
            # JSON text can hold a lone surrogate; a UTF-8 request body cannot.
            _refuse_surrogates({"description": description, "schema": schema}, "response_format")
        setter = object.__setattr__
        setter(self, "kind", kind)
        setter(self, "schema", schema)
        setter(self, "name", resolved)
        setter(self, "description", description)
        setter(self, "strict", strict)
        setter(self, "output_type", output_type)
        setter(self, "key", key)

    @classmethod
    def coerce(cls, value: Any) -> ResponseFormat[Any] | None:
        """Accept what ``complete(response_format=...)`` takes; ``None`` and OpenAI's
        ``{"type": "text"}`` give ``None`` (a plain answer). A model class is converted once
        and remembered.

        Raises:
            ValueError: as the constructor.
        """
        if value is None or isinstance(value, ResponseFormat):
            return value
        if isinstance(value, type):
            return _format_of_class(value)
        if isinstance(value, Mapping) and value.get("type") == "text" and len(value) == 1:
            return None
        return cls(value)


_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
"""Keywords whose value is data, not a schema: a ``$ref`` key in it is not a reference."""


def _check_refs(node: Any, root: Mapping[str, Any], path: str) -> None:
    """Refuse a local ``$ref`` (``#``, ``#/$defs/X``) in ``node`` that does not resolve
    within ``root``: the answer could never be validated, and the call would be paid first.
    One walk of the schema, when the :class:`ResponseFormat` is built."""
    if isinstance(node, Mapping):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#") and not _points(root, ref):
            raise InvalidInputError(
                f"response_format schema{path or ' root'} has $ref {ref!r}, which does not "
                "resolve within the schema: a local $ref is a JSON pointer to a part of it "
                "('#/$defs/Name' with that name under '$defs', or '#' for the root)"
            )
        for key, value in node.items():
            if key not in _DATA_KEYWORDS:
                _check_refs(value, root, f"{path}.{key}" if path else f" at {key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _check_refs(value, root, f"{path}[{i}]")


def _points(root: Mapping[str, Any], ref: str) -> bool:
    """Whether the JSON pointer in the fragment ``ref`` (RFC 6901, percent-decoded as a URI
    fragment) names a part of ``root``."""
    from urllib.parse import unquote

    pointer = unquote(ref[1:])
    if not pointer:
        return True
    if not pointer.startswith("/"):
        return False  # a plain-name fragment needs an $anchor; polythink resolves none
    node: Any = root
    for token in pointer[1:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return False
    return True


@functools.lru_cache(maxsize=256)
def _format_of_class(model: type[Any]) -> ResponseFormat[Any]:
    return ResponseFormat(model)


def _model_schema(model: type[Any]) -> tuple[Mapping[str, Any], str]:
    """The JSON Schema of a pydantic model class, and its default name."""
    make = getattr(model, "model_json_schema", None)
    if not callable(make) or not callable(getattr(model, "model_validate_json", None)):
        raise InvalidInputError(
            f"response_format class {model.__name__} is not a pydantic model (a BaseModel "
            f"subclass); accepted: {_ACCEPTED_FORMATS}"
        )
    try:
        schema = make()
    except Exception as exc:
        # pydantic raises AttributeError, TypeError or its own errors for a model it cannot
        # describe (a field of a type with no JSON Schema): the caller's mistake, named.
        raise InvalidInputError(
            f"response_format class {model.__name__} has no JSON Schema: pydantic's "
            f"model_json_schema() raised {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(schema, Mapping):
        raise InvalidInputError(
            f"{model.__name__}.model_json_schema() did not return a JSON Schema"
        )
    return schema, model.__name__


def _schema_of(
    value: Mapping[str, Any],
) -> tuple[Literal["json_schema", "json_object"], Mapping[str, Any] | None, Mapping[str, Any]]:
    """``(kind, schema, envelope fields)`` of a dict ``response_format``."""
    kind = value.get("type")
    if kind == "json_object":
        if set(value) != {"type"}:
            raise InvalidInputError(
                f"{{'type': 'json_object'}} takes no other key; got {dict(value)!r}. Accepted: "
                f"{_ACCEPTED_FORMATS}"
            )
        return "json_object", None, {}
    if kind == "text":
        raise InvalidInputError(
            "{'type': 'text'} asks for a plain answer: pass response_format=None (ResponseFormat "
            "takes only JSON formats)"
        )
    if kind != "json_schema":
        return "json_schema", value, {}
    inner = value.get("json_schema", value)
    if not isinstance(inner, Mapping):
        raise InvalidInputError(
            f"json_schema must be a dict with 'name' and 'schema'; got {inner!r}"
        )
    allowed = {"name", "schema", "strict", "description"} | ({"type"} if inner is value else set())
    unknown = sorted(set(inner) - allowed)
    if unknown or (inner is not value and set(value) != {"type", "json_schema"}):
        raise InvalidInputError(
            f"unknown key(s) {unknown or sorted(set(value) - {'type', 'json_schema'})} in "
            f"response_format; accepted: {_ACCEPTED_FORMATS}"
        )
    schema = inner.get("schema")
    if not isinstance(schema, Mapping):
        raise InvalidInputError(
            f"a json_schema response_format needs its 'schema' (a JSON Schema dict); got {schema!r}"
        )
    strict = inner.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise InvalidInputError(f"json_schema.strict must be a bool; got {strict!r}")
    name = inner.get("name")
    if name is not None and (not isinstance(name, str) or not _FORMAT_NAME.fullmatch(name)):
        raise InvalidInputError(
            f"json_schema.name {name!r} is refused by providers: use 1 to 64 letters, digits, "
            "'_' or '-'"
        )
    description = inner.get("description")
    if description is not None and not isinstance(description, str):
        raise InvalidInputError(f"json_schema.description must be a string; got {description!r}")
    # OpenAI's envelope: strict is false unless said (openai_openapi.yaml ResponseFormatJsonSchema).
    return (
        "json_schema",
        schema,
        {"name": name, "description": description, "strict": bool(strict)},
    )


class NativeRelay(Protocol):
    """Where a transport hands what a provider answered to a call carrying a
    :class:`NativeBody`, as it answered it (``polythink serve`` implements it).

    A transport calls it only for an attempt it sent natively (its wire is the body's);
    nothing it does changes the call: errors are the relay's to keep.

    ``committed`` is true once part of the streamed answer reached the caller through the
    relay: a failure after that ends the call with
    :class:`~polythink.errors.StreamInterruptedError`, never a retry or another source.
    """

    committed: bool

    def noted(self, source_index: int, notes: Sequence[str]) -> None:
        """What the transport changed in the caller's body for a streamed attempt (the
        response's warnings it knows before sending: reasoning fields rewritten, parameters
        the model refuses dropped), before the attempt is sent; only when there are some."""

    def opened(self, source_index: int, status: int, headers: Mapping[str, str]) -> None:
        """A streamed answer's head arrived with a 2xx ``status``."""

    async def event(self, event_type: str, data: str) -> None:
        """One server-sent event of that answer, as decoded (its ``event:`` name and its
        ``data``), before the transport reads it."""

    def answered(
        self, source_index: int, status: int, headers: Mapping[str, str], content: bytes
    ) -> None:
        """A non-streamed answer arrived: its 2xx ``status``, headers and body bytes."""

    def failed(
        self, source_index: int, status: int, headers: Mapping[str, str], content: bytes
    ) -> None:
        """The provider answered with a status of 300 or more: its headers and body bytes."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NativeBody:
    """A caller's own request body in one wire's format, to send as written.

    ``polythink serve`` parses each request into a :class:`Request` (so every source, of any
    wire, can take it) and carries the body it received here. A transport of the same
    ``wire`` sends ``body`` instead of building one, changing only what polythink owns:
    ``model`` (the source's), ``stream``, the output ceiling when a layer changed it, and the
    reasoning fields when the source's model does not take the caller's as written (see
    :func:`polythink.transports.native.native_body`). Unknown fields, ``system`` arrays,
    thinking blocks with their signatures and ``cache_control`` go through untouched.

    Attributes:
        wire: the transport wire the body is written for (``anthropic``, ``openai_chat``,
            ``openai_responses``).
        body: the parsed JSON object, read-only.
        key: a digest of the body (part of the cache key).
        dialect: the reasoning dialect of the caller's own reasoning fields (a
            :data:`polythink.providers.ReasoningWire` value), ``None`` when it sent none.
        effort: the tier those fields ask for, in polythink's vocabulary.
        style: Anthropic's thinking style they are written in (``manual``: ``enabled``
            with a budget; ``adaptive``: ``adaptive`` or ``output_config.effort``, the
            strength of adaptive thinking; ``mixed``: both, which no model takes as
            written), else ``None``. A model of another style gets polythink's fields.
        reasoning_paths: where those fields are, as key paths (``("thinking",)``,
            ``("output_config", "effort")``): removed when polythink sends its own.
        max_tokens_key: the body field holding the caller's output ceiling, if any.
        headers: request headers of the wire that go with the body (``anthropic-beta``,
            ``anthropic-version`` …), lowercase names; never credentials.
        relay: where the raw answer goes (``None``: nowhere).
    """

    wire: str
    body: Mapping[str, Any]
    key: str = ""
    dialect: str | None = None
    effort: Effort | None = None
    style: str | None = None
    reasoning_paths: tuple[tuple[str, ...], ...] = ()
    max_tokens_key: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    relay: NativeRelay | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """One chat call as it travels through the onion, independent of any source.

    Outer layers see it as the caller built it; the reasoning layer derives a copy with
    ``resolution`` set for its source before the transport builds the body.

    Units: ``max_tokens`` in tokens (the caller's answer budget); ``timeout`` in seconds
    (total deadline for the call, ``None`` = the source's default).

    ``system_suffix`` is the dynamic tail of the system prompt (a plan, memory, anything
    that changes from call to call), kept apart so the stable system prompt before it stays
    a cacheable prefix; ``prompt_cache`` marks that prefix for the provider's prompt cache
    (see :class:`PromptCache`). ``response_format`` asks for a JSON answer (see
    :class:`ResponseFormat`).

    ``extra_headers`` are HTTP headers for this call, merged over the source's own (names
    compared case-insensitively; a value here wins, ``authorization`` included). Middleware
    sets them; those a client's own middleware sets are part of the cache key, but for
    credential and tracing headers (:func:`polythink.cache_key.keyed_headers`), and they are
    left out of ``repr`` (they may carry credentials).
    """

    messages: tuple[Message, ...]
    reasoning_effort: Effort | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] | None = None
    tools: tuple[Tool, ...] = ()
    tool_choice: str | Mapping[str, Any] | None = None
    extra_body: Mapping[str, Any] | None = None
    stream: bool = False
    timeout: float | None = None
    cache: CacheMode = True
    resolution: Resolution | None = None
    system_suffix: str | None = None
    prompt_cache: PromptCache | None = None
    extra_headers: Mapping[str, str] | None = field(default=None, repr=False)
    response_format: ResponseFormat[Any] | None = None
    tag: str | None = None
    """The caller's label for this call (a tenant or customer id) that spend budgets scoped
    by tag count it under; never sent, never part of the cache key."""
    cache_namespace: str | None = None
    """Whose cache entries this call may read and write (``polythink serve`` gives each
    tenant its own): part of the cache key when set, so calls in two namespaces never share
    an entry, nor a fill; never sent."""
    prefix_mismatch: str | None = None
    """What Anthropic does with a replayed thinking block that fails its prefix check, for
    this call (``"error"`` or ``"drop_block"``; ``None``: the source's setting). See
    :attr:`polythink.Source.prefix_mismatch`."""
    service_tier: ServiceTier | None = None
    """The service tier this call asks for (``None``: the source's, else unset). Not part of
    the cache key: a tier changes the price and the wait, not the answer."""
    tier_resolution: TierResolution | None = None
    """The source's resolution of the service tier, attached by its tier layer (or by a
    budget that moved the call to flex) before the transport builds the body."""
    native: NativeBody | None = field(default=None, repr=False)
    """The caller's own body in one wire's format (``polythink serve``): a source of that
    wire sends it as written (see :class:`NativeBody`); others build theirs from the fields
    above. Its ``key`` is part of the cache key."""

    def __repr__(self) -> str:
        """The fields as the dataclass shows them, ``extra_body`` through :func:`redacted`."""
        return fields_repr(self, extra_body=redacted(self.extra_body))

    def with_(self, **changes: Any) -> Request:
        """Return a copy with the fields named in ``changes`` replaced.

        The request itself is never changed, so a middleware hands ``call_next`` a derived
        request (``request.with_(messages=..., extra_headers=...)``) and the layers outside
        it still hold the one they passed in.

        Raises:
            TypeError: for a name that is not a field of :class:`Request`.
        """
        if not _REQUEST_FIELDS.issuperset(changes):
            return dataclasses.replace(self, **changes)  # raises the TypeError
        return cast(Request, _copied_request(self, changes))


@dataclass(frozen=True, slots=True, kw_only=True)
class Response(Generic[_ParsedT]):
    """The normalised result of one chat call, the same shape for every provider.

    ``message`` is the assistant turn to append to the conversation; it carries the
    provider's opaque reasoning items so the next call sends them back. ``usage`` is
    ``None`` when the provider reported none. ``output_limited`` is true when the model hit
    its output ceiling (``finish_reason == "length"``). ``rate_limit`` is the rate-limit
    state the provider's headers reported with this answer, ``None`` when it sent none or
    when the answer came from the cache. ``interrupted`` is true only on
    :attr:`~polythink.errors.StreamInterruptedError.partial`: the stream broke, so this is
    not an answer (its ``message.metadata.interrupted`` says so too, once appended). ``cost``
    is what the call cost in US dollars (:class:`Cost`), ``None`` when usage is missing or the
    model is not priced; a cache hit carries the cost of the call that filled the entry.

    ``parsed`` is the answer validated against the call's ``response_format``: an instance
    of its pydantic model class (``Response[Invoice]`` to a type checker), or the decoded
    JSON for a dict schema. It is ``None`` on a call without ``response_format``, and on a
    turn that calls tools (``finish_reason == "tool_calls"``: run them and call again). An
    answer that is refused, cut or invalid never comes back with ``parsed`` unset: it
    raises :class:`~polythink.errors.OutputValidationError`. ``refusal`` is the model's
    refusal message where the provider sends one (OpenAI ``message.refusal``, Responses
    ``refusal`` parts, Anthropic ``stop_details.explanation``), also counted in ``text``;
    such an answer has ``finish_reason == "content_filter"``.
    """

    text: str
    reasoning: str | None
    tool_calls: list[ToolCall]
    finish_reason: str
    usage: Usage | None
    model: str
    provider: str
    source_index: int
    message: Message
    requested_effort: Effort | None = None
    applied_effort: Effort | None = None
    thinking: ThinkingObservation = ThinkingObservation.UNKNOWN
    warnings: list[str] = field(default_factory=list)
    cache_hit: bool = False
    output_limited: bool = False
    id: str | None = None
    rate_limit: RateLimit | None = None
    native_finish_reason: str | None = None
    """The provider's own finish value as sent (``finish_reason``, ``stop_reason``,
    ``finishReason``, or the Responses ``status`` / ``incomplete_details.reason``); ``None``
    when the provider sent none."""
    interrupted: bool = False
    cost: Cost | None = None
    parsed: _ParsedT = None  # type: ignore[assignment]
    refusal: str | None = None
    step_down: StepDown | None = None
    """Set when a spend budget made the call reason at a cheaper tier than requested, or
    moved it to flex (``applied_effort`` / ``applied_service_tier`` say to what; a warning
    says so too); ``None`` otherwise."""
    input_transformations: list[Mapping[str, Any]] = field(default_factory=list)
    """What the provider did to the request's reasoning before the model read it, one entry
    per block, as the provider reported it: Anthropic's ``input_transformations``
    (``{"type": "thinking_dropped" | "thinking_mismatch_allowed", "path":
    "messages.3.content.0", "reason": "model_binding_mismatch" | "prefix_binding_mismatch" |
    "organization_binding_mismatch" | "end_user_binding_mismatch"}``; entry types and reasons
    polythink does not know are kept as sent), reported under the beta
    ``thinking-binding-controls-2026-08-01`` (CONTINUITY.md §1.6). Each entry also has a
    warning naming the path and the reason. Empty when nothing was reported."""
    service_tier: str | None = None
    """The service tier that served the call, as the provider reported it, in polythink's
    vocabulary where it maps (``flex``, ``standard``, ``priority``, and ``batch`` for a
    batch result), else the provider's own value (``ultrafast``); ``None`` when the provider
    did not say. Read from the body's ``service_tier`` (OpenAI, Groq), Anthropic's
    ``usage.service_tier``, Gemini's ``x-gemini-service-tier`` header or Vertex AI's
    ``usageMetadata.trafficType``. The cost is priced at this tier."""
    requested_service_tier: ServiceTier | None = None
    """The service tier the call asked for (its own, else its source's; ``None``: unset)."""
    applied_service_tier: ServiceTier | None = None
    """The service tier sent, after nearest-mapping onto what the provider and model take,
    a budget's move to flex, or a resend at ``standard`` after "no capacity"; ``None`` when
    none was sent."""

    def with_(self, **changes: Any) -> Response[_ParsedT]:
        """Return a copy with the fields named in ``changes`` replaced (as
        :func:`dataclasses.replace` does, several times faster: a response is copied three
        or four times on its way through the layers).

        Raises:
            TypeError: for a name that is not a field of :class:`Response`.
        """
        if not _RESPONSE_FIELDS.issuperset(changes):
            return dataclasses.replace(self, **changes)  # raises the TypeError
        return cast(Response[_ParsedT], _copied_response(self, changes))


def _copier(cls: type, twin: type) -> Callable[[Any, Mapping[str, Any]], Any]:
    """Build ``copy(value, changes)`` for a frozen, slotted dataclass ``cls`` without
    ``__post_init__``: the fields are read at once and stored into ``twin`` (the same slots,
    without the frozen ``__setattr__``), which then becomes a ``cls``, as the fast path of
    :meth:`Message.coerce` builds a message. No check runs, as none would in
    :func:`dataclasses.replace` for such a class."""
    names: tuple[str, ...] = cls.__dict__["__slots__"]
    read = operator.attrgetter(*names)
    new = object.__new__

    def copy(value: Any, changes: Mapping[str, Any]) -> Any:
        fill: Any = new(twin)
        for name, item in zip(names, read(value), strict=True):
            setattr(fill, name, item)
        for name, item in changes.items():
            setattr(fill, name, item)
        fill.__class__ = cls
        return fill

    return copy


class _RequestSlots:
    __slots__ = Request.__slots__


class _ResponseSlots(Generic[_ParsedT]):
    __slots__ = Response.__slots__


_REQUEST_FIELDS = frozenset(Request.__slots__)
_RESPONSE_FIELDS = frozenset(Response.__slots__)
_copied_request = _copier(Request, _RequestSlots)
_copied_response = _copier(Response, _ResponseSlots)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDelta:
    """One piece of a tool call while it streams (the ``tool_call_delta`` event).

    ``index`` is the call's position in the answer (0, 1, …; the same for every piece of one
    call). ``id`` and ``name`` are set once known (some servers send them only on the first
    piece; Gemini sends whole calls, so one delta carries everything). ``arguments`` is the
    new piece of the JSON arguments text, possibly empty; joined in order, the pieces of one
    call equal the complete ``tool_call``'s ``arguments`` (a call whose pieces join to nothing
    completes with ``"{}"``). Arguments a server sent as a JSON object arrive as one piece of
    compact JSON.
    """

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One event of ``Client.stream``.

    ``type`` is ``text`` or ``reasoning`` (``text`` holds the delta), ``tool_call_delta`` (a
    piece of a call as it arrives; ``tool_call_delta`` holds it), ``tool_call`` (a call is
    complete; ``tool_call`` holds it), ``usage`` (``usage`` holds the counts reported so far),
    or ``done`` (always last; ``response`` holds the assembled :class:`Response`). Every
    call's ``tool_call_delta`` events come before its ``tool_call`` event.
    """

    type: StreamEventType
    text: str | None = None
    tool_call: ToolCall | None = None
    usage: Usage | None = None
    response: Response | None = None
    tool_call_delta: ToolCallDelta | None = None


# The static view of a StreamEvent, one per ``type``: ``Client.stream`` is typed as yielding
# their union, so ``if event.type == "done":`` narrows ``event.response`` to ``Response``
# under a type checker. At run time every event is a StreamEvent; a new event type adds its
# view here and to TypedStreamEvent.


class TextEvent(Protocol):
    """A ``text`` event: ``text`` is the delta of the answer."""

    @property
    def type(self) -> Literal["text"]: ...
    @property
    def text(self) -> str: ...
    @property
    def tool_call(self) -> None: ...
    @property
    def usage(self) -> None: ...
    @property
    def response(self) -> None: ...
    @property
    def tool_call_delta(self) -> None: ...


class ReasoningEvent(Protocol):
    """A ``reasoning`` event: ``text`` is the delta of the reasoning text."""

    @property
    def type(self) -> Literal["reasoning"]: ...
    @property
    def text(self) -> str: ...
    @property
    def tool_call(self) -> None: ...
    @property
    def usage(self) -> None: ...
    @property
    def response(self) -> None: ...
    @property
    def tool_call_delta(self) -> None: ...


class ToolCallEvent(Protocol):
    """A ``tool_call`` event: ``tool_call`` is a complete call."""

    @property
    def type(self) -> Literal["tool_call"]: ...
    @property
    def text(self) -> None: ...
    @property
    def tool_call(self) -> ToolCall: ...
    @property
    def usage(self) -> None: ...
    @property
    def response(self) -> None: ...
    @property
    def tool_call_delta(self) -> None: ...


class ToolCallDeltaEvent(Protocol):
    """A ``tool_call_delta`` event: ``tool_call_delta`` is a piece of a call as it arrives."""

    @property
    def type(self) -> Literal["tool_call_delta"]: ...
    @property
    def text(self) -> None: ...
    @property
    def tool_call(self) -> None: ...
    @property
    def usage(self) -> None: ...
    @property
    def response(self) -> None: ...
    @property
    def tool_call_delta(self) -> ToolCallDelta: ...


class UsageEvent(Protocol):
    """A ``usage`` event: ``usage`` holds the counts reported so far."""

    @property
    def type(self) -> Literal["usage"]: ...
    @property
    def text(self) -> None: ...
    @property
    def tool_call(self) -> None: ...
    @property
    def usage(self) -> Usage: ...
    @property
    def response(self) -> None: ...
    @property
    def tool_call_delta(self) -> None: ...


class DoneEvent(Protocol[_ParsedT]):
    """The ``done`` event, always last: ``response`` is the assembled :class:`Response`
    (``Response[Invoice]`` on a stream with ``response_format=Invoice``)."""

    @property
    def type(self) -> Literal["done"]: ...
    @property
    def text(self) -> None: ...
    @property
    def tool_call(self) -> None: ...
    @property
    def usage(self) -> None: ...
    @property
    def response(self) -> Response[_ParsedT]: ...
    @property
    def tool_call_delta(self) -> None: ...


TypedStreamEvent: TypeAlias = (
    TextEvent
    | ReasoningEvent
    | ToolCallDeltaEvent
    | ToolCallEvent
    | UsageEvent
    | DoneEvent[_ParsedT]
)
"""What ``Client.stream`` yields, for a type checker: a :class:`StreamEvent` seen through the
view of its ``type`` (narrow with ``event.type == "done"`` and the like);
``TypedStreamEvent[Invoice]`` on a stream with ``response_format=Invoice``."""


_MOVED = {
    "PrefixStates": "polythink.conversion",
    "coerce_messages": "polythink.conversion",
    "coerce_tools": "polythink.conversion",
    "tools_memo": "polythink.conversion",
    "MANAGED_BODY_FIELDS": "polythink.wire_json",
    "check_extra_body": "polythink.wire_json",
    "loads_json": "polythink.wire_json",
}
"""Names this module held before they moved to modules of their own, by their new module."""


def __getattr__(name: str) -> Any:
    # ``from polythink.types import coerce_messages`` keeps working. The new modules import
    # this one, so it reaches them only here, when such a name is first asked for: loading
    # this module loads nothing else of the package.
    home = _MOVED.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(home), name)
