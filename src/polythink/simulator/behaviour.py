"""What every simulated provider shares: model knowledge, reasoning depth, answer text.

The simulator behaves like the providers for reasoning because it consults the same
capability registry polythink resolves against: a registered model that does not accept a
tier is rejected the way its provider rejects it, and the reasoning it returns grows with
the tier. Everything here is deterministic, so tests can assert exact values.
"""

from __future__ import annotations

import contextvars
import datetime
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from polythink.providers import PROVIDERS
from polythink.reasoning.capabilities import get_capability, normalise_model_name
from polythink.reasoning.capability import Capability
from polythink.reasoning.lifecycle import status
from polythink.types import Effort

__all__ = [
    "PLAYED",
    "REASONING_TOKENS",
    "REFUSAL",
    "STRUCTURED_OUTPUTS",
    "Answer",
    "accepts",
    "answer_for",
    "asked_in_prompt",
    "default_tier",
    "example_value",
    "instruction_texts",
    "mentions_json",
    "message_texts",
    "openai_error",
    "openai_not_found",
    "prompt_tokens",
    "quoted_list",
    "reasoning_text",
    "retired",
    "schema_in_prompt",
    "strict_schema_error",
    "strict_schema_problem",
    "structured_mode",
    "structured_pieces",
    "takes_parameter",
    "tool_arguments",
]

REASONING_TOKENS: dict[Effort, int] = {
    Effort.NONE: 0,
    Effort.MINIMAL: 12,
    Effort.LOW: 40,
    Effort.MEDIUM: 120,
    Effort.HIGH: 320,
    Effort.XHIGH: 640,
    Effort.MAX: 1024,
    Effort.AUTO: 120,
}
"""Reasoning tokens the simulator spends per tier (``auto`` reasons like ``medium``)."""

_WORDS_PER_TOKEN = 0.25


PLAYED: contextvars.ContextVar[Mapping[str, Capability | None] | None] = contextvars.ContextVar(
    "polythink_simulator_played", default=None
)
"""The models whose capabilities this request's simulator plays instead of the registry's
(``Settings.capabilities``; the server sets it for each request it dispatches)."""

_NO_PARAMETER = object()


def _played(model: str) -> Any:
    played = PLAYED.get()
    if not played:
        return get_capability(model)
    if model in played:
        found = played[model]
    else:
        name = normalise_model_name(model)
        found = next(
            (cap for key, cap in played.items() if normalise_model_name(key) == name),
            get_capability(model),
        )
    return _NO_PARAMETER if found is None else found


def retired(model: str, provider: str, today: str | None) -> Capability | None:
    """The registry entry of ``model`` when ``provider`` has shut it down by ``today``
    (``None`` = the real date, UTC), else ``None``. A played model is never retired."""
    found = _played(model)
    if not isinstance(found, Capability) or found.shutdown is None:
        return None
    profile = PROVIDERS.get(provider)
    if profile is None or found.provider not in (None, profile.serves):
        return None
    day = today or datetime.datetime.now(datetime.UTC).date().isoformat()
    return found if status(found, day) == "retired" else None


def takes_parameter(model: str) -> bool:
    """Whether the model accepts a reasoning parameter at all (``False`` only where the
    simulator was told it takes none)."""
    return _played(model) is not _NO_PARAMETER


def capability(model: str) -> Capability | None:
    """The capability the simulator plays for ``model`` (``Settings.capabilities``, else the
    registry entry), or ``None`` for an unregistered model or one that takes no parameter."""
    found = _played(model)
    return None if found is _NO_PARAMETER else found


def default_tier(model: str) -> Effort:
    """The tier a model reasons at when the request sends no reasoning field."""
    cap = capability(model)
    if cap is None:
        return Effort.MEDIUM
    if cap.default_effort is not None:
        return cap.default_effort
    return Effort.MEDIUM if cap.reasons and not cap.can_disable else Effort.NONE


def accepts(model: str, tier: Effort) -> bool:
    """Whether a registered model accepts ``tier`` (unregistered models accept anything)."""
    cap = capability(model)
    if cap is None:
        return True
    if tier is Effort.AUTO:
        return cap.reasons
    return tier in cap.supported_efforts


def supported_listing(model: str) -> list[str]:
    """The tiers a registered model accepts, as strings (empty when unregistered)."""
    cap = capability(model)
    return [e.value for e in cap.supported_efforts] if cap else []


def reasoning_text(tier: Effort, prompt: str) -> str:
    """Reasoning prose whose length grows with the tier (empty for ``none``)."""
    tokens = REASONING_TOKENS[tier]
    if not tokens:
        return ""
    topic = " ".join(prompt.split()[:6]) or "the request"
    steps = max(1, int(tokens * _WORDS_PER_TOKEN) // 6)
    return " ".join(f"Step {i}: weigh {topic}." for i in range(1, steps + 1))


@dataclass(frozen=True)
class Answer:
    """A deterministic answer: its words and token counts."""

    words: list[str]
    reasoning: str
    reasoning_tokens: int
    prompt_tokens: int

    @property
    def text(self) -> str:
        """The answer text."""
        return "".join(self.words)

    @property
    def completion_tokens(self) -> int:
        """Answer tokens plus reasoning tokens."""
        return len(self.words) + self.reasoning_tokens


def prompt_tokens(messages: Sequence[Any]) -> int:
    """A stable token estimate for a prompt: 1 per 4 bytes of each message's compact JSON,
    at least 1 per message (:func:`polythink.simulator.prompt_cache.tokens_of`)."""
    from polythink.simulator.prompt_cache import tokens_of

    return sum(tokens_of(message) for message in messages)


def answer_for(
    model: str, prompt: str, tier: Effort, words: int, messages: Sequence[Any]
) -> Answer:
    """Build the answer for a prompt: ``words`` words echoing it, and tier-sized reasoning."""
    digest = hashlib.sha256(prompt.encode()).hexdigest()[:6]
    base = f"Simulated {model} answer {digest} to: {prompt}".split()
    pieces = [base[i % len(base)] for i in range(max(1, words))]
    spaced = [pieces[0], *(" " + p for p in pieces[1:])]
    return Answer(
        words=spaced,
        reasoning=reasoning_text(tier, prompt),
        reasoning_tokens=REASONING_TOKENS[tier],
        prompt_tokens=prompt_tokens(messages),
    )


def tool_arguments(schema: Mapping[str, Any] | None) -> str:
    """Compact JSON arguments: the tool's required properties (its first property when none
    is required), each an :func:`example_value` of its schema."""
    args: dict[str, Any] = {}
    if isinstance(schema, Mapping):
        props = schema.get("properties")
        props = props if isinstance(props, Mapping) else {}
        for name in schema.get("required") or list(props)[:1]:
            args[name] = example_value(props.get(name) or {}, schema)
    return json.dumps(args, separators=(",", ":"))


def openai_error(message: str, *, param: str | None, code: str | None) -> dict[str, Any]:
    """An OpenAI-shaped ``invalid_request_error`` body (as recorded in
    vercel_openai_chat_reasoning_max_tokens_error.json)."""
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": param,
            "code": code,
        }
    }


def tool_schema_error(tools: Any, param: str) -> dict[str, Any] | None:
    """OpenAI's 400 for a function tool whose ``parameters`` is not a JSON Schema of an object,
    in its words, else ``None``.

    ``param`` is where a tool's schema sits, ``{i}`` standing for its index
    (``tools[{i}].function.parameters`` on Chat, ``tools[{i}].parameters`` on Responses).
    OpenAI answers ``invalid_request_error`` / ``invalid_function_parameters`` with "Invalid
    schema for function 'NAME': schema must be a JSON Schema of 'type: "object"', got 'type:
    "string"'." for another top-level type (reported in ComposioHQ/composio#1829, 2025-08-06,
    and alibaba/spring-ai-alibaba#4576, 2026-04-29), and with the JSON Schema validator's own
    words ("[] is not of type 'object', 'boolean'", FoundationAgents/OpenManus#1162,
    2025-06-11) for a schema the meta-schema refuses.
    """
    if not isinstance(tools, list):
        return None
    from jsonschema import Draft202012Validator

    for index, tool in enumerate(tools):
        if not isinstance(tool, Mapping) or tool.get("type", "function") != "function":
            continue
        inner = tool.get("function")
        spec: Mapping[str, Any] = inner if isinstance(inner, Mapping) else tool
        parameters = spec.get("parameters")
        if parameters is None or parameters == {}:
            continue  # no parameters: a function that takes none
        name = spec.get("name")
        problem = None
        if not isinstance(parameters, Mapping) or parameters.get("type") != "object":
            kind = parameters.get("type") if isinstance(parameters, Mapping) else None
            shown = json.dumps(kind) if isinstance(kind, str) else str(kind)
            problem = f"schema must be a JSON Schema of 'type: \"object\"', got 'type: {shown}'."
        else:
            errors = sorted(
                Draft202012Validator(Draft202012Validator.META_SCHEMA).iter_errors(parameters),
                key=lambda e: list(e.absolute_path),
            )
            if errors:
                problem = f"{errors[0].message}."
        if problem is not None:
            return openai_error(
                f"Invalid schema for function '{name}': {problem}",
                param=param.format(i=index),
                code="invalid_function_parameters",
            )
    return None


def openai_not_found(model: str, provider: str) -> tuple[int, dict[str, Any]]:
    """How an OpenAI-shaped provider answers a request for a model it no longer serves:
    OpenAI's 404 ``model_not_found`` ("The model `x` does not exist or you do not have access
    to it."), Groq's 400 ``model_decommissioned`` (valentinfrlch/ha-llmvision#324, 2025-04)."""
    if provider == "groq":
        return 400, openai_error(
            f"The model `{model}` has been decommissioned and is no longer supported. Please "
            "refer to https://console.groq.com/docs/deprecations for a recommendation on which "
            "model to use instead.",
            param=None,
            code="model_decommissioned",
        )
    return 404, openai_error(
        f"The model `{model}` does not exist or you do not have access to it.",
        param=None,
        code="model_not_found",
    )


def quoted_list(values: list[str]) -> str:
    """``'a', 'b', and 'c'``: how OpenAI lists supported values in its 400 messages."""
    quoted = [f"'{v}'" for v in values]
    if len(quoted) <= 1:
        return "".join(quoted)
    return ", ".join(quoted[:-1]) + ", and " + quoted[-1]


STRUCTURED_OUTPUTS = ("valid", "invalid", "refusal", "truncated")
"""How the simulator answers a request for structured output (``Settings.structured_output``
or header ``x-sim-structured-output``): a valid object, one missing a required property, a
refusal in the wire's own form, or the object cut short with the wire's output-limit stop."""

REFUSAL = "I'm sorry, but I can't help with that request."
"""The refusal text the simulator sends, where a wire carries one."""

_FORMATS = {
    "date-time": "2026-12-01T12:00:00Z",
    "date": "2026-12-01",
    "time": "12:00:00",
    "duration": "P1D",
    "email": "sim@example.com",
    "hostname": "example.com",
    "uri": "https://example.com/sim",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "uuid": "00000000-0000-4000-8000-000000000000",
}
_PIECE = 6
"""Characters per streamed piece of a JSON answer (one piece per token in the usage)."""


def structured_mode(headers: Mapping[str, str], default: str) -> str:
    """The structured answer asked for: header ``x-sim-structured-output``, else
    ``default``; an unknown value is ``valid``."""
    mode = headers.get("x-sim-structured-output", default)
    return mode if mode in STRUCTURED_OUTPUTS else "valid"


_DEEPEST = 64
"""Nesting at which :func:`example_value` gives up (``null``): only a schema that admits no
finite value gets there."""


def example_value(schema: Any, root: Mapping[str, Any] | None = None) -> Any:
    """A value that fits ``schema``: every property filled, arrays of ``minItems`` items
    (at least one), the first ``enum`` value or ``anyOf`` branch that is not null, the
    lowest number its bounds allow, a string in its ``format``. Types are read in either
    case (``responseSchema`` spells them ``OBJECT``, ``STRING``) and as a list
    (``["string", "null"]``).

    Local ``$ref`` (``#``, ``#/$defs/X``, ``#/definitions/X``) are followed. A recursive
    schema is unrolled once: inside a definition already being filled, objects get only
    their required properties, arrays only their ``minItems`` (none by default), and a
    union its ``null`` branch when it has one, so the value ends (a tree of two levels)."""
    return _example(schema, schema if root is None else root, (), 0)


def _example(schema: Any, root: Mapping[str, Any], refs: tuple[str, ...], depth: int) -> Any:
    if not isinstance(schema, Mapping) or depth > _DEEPEST:
        return None
    deep = len(set(refs)) < len(refs)
    ref = schema.get("$ref")
    if isinstance(ref, str) and (ref == "#" or ref.startswith("#/")):
        target: Any = root
        for part in ref[2:].split("/") if ref != "#" else ():
            target = target.get(part) if isinstance(target, Mapping) else None
        return _example(target, root, (*refs, ref), depth + 1)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            nulls = [b for b in branches if isinstance(b, Mapping) and _kind(b) == "null"]
            others = [b for b in branches if not any(b is n for n in nulls)]
            chosen = (nulls if deep and nulls else others or branches)[0]
            return _example(chosen, root, refs, depth + 1)
    kind = _kind(schema, prefer_null=deep)
    if kind == "object" or isinstance(schema.get("properties"), Mapping):
        properties = schema.get("properties") or {}
        if deep:
            required = schema.get("required")
            required = required if isinstance(required, list) else ()
            properties = {name: sub for name, sub in properties.items() if name in required}
        return {name: _example(sub, root, refs, depth + 1) for name, sub in properties.items()}
    if kind == "array":
        least = int(schema.get("minItems") or 0)
        count = least if deep else max(1, least)
        return [_example(schema.get("items"), root, refs, depth + 1) for _ in range(count)]
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        value = low + 1 if "exclusiveMinimum" in schema and "minimum" not in schema else low
        if value is None:
            value = 1
        return int(value) if kind == "integer" else float(value) + 0.5
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return _FORMATS.get(str(schema.get("format")), "sim")


def _kind(schema: Mapping[str, Any], *, prefer_null: bool = False) -> str | None:
    """The schema's ``type`` in lower case; of a type list, the first that is not null
    (``null`` itself with ``prefer_null``, when the list has it)."""
    kind = schema.get("type")
    if isinstance(kind, list):
        names = [str(k).lower() for k in kind]
        if prefer_null and "null" in names:
            return "null"
        return next((k for k in names if k != "null"), "null")
    return kind.lower() if isinstance(kind, str) else None


def schema_in_prompt(texts: Sequence[str]) -> Mapping[str, Any] | None:
    """The JSON Schema a prompt quotes after the words "JSON Schema" (as a model told to
    follow one would read it), or ``None``."""
    decoder = json.JSONDecoder()
    for text in texts:
        at = text.lower().find("json schema")
        start = text.find("{", at) if at >= 0 else -1
        if start < 0:
            continue
        try:
            found, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(found, Mapping):
            return found
    return None


def instruction_texts(messages: Sequence[Any]) -> list[str]:
    """The texts a model takes instructions from, of OpenAI- or Anthropic-shaped messages:
    every system (or developer) message, and the last message when it is the user's (where
    per-call instructions go when they follow the conversation)."""
    chosen = [
        m for m in messages if isinstance(m, Mapping) and m.get("role") in ("system", "developer")
    ]
    last = messages[-1] if messages else None
    if isinstance(last, Mapping) and last.get("role") == "user":
        chosen.append(last)
    return message_texts(chosen)


def asked_in_prompt(system_texts: Sequence[str]) -> Mapping[str, Any] | None:
    """What a model told in its system prompt to answer in JSON would follow: the schema
    quoted there (:func:`schema_in_prompt`), ``{}`` when JSON is asked without one, ``None``
    when the system prompt does not mention JSON."""
    if not mentions_json(system_texts):
        return None
    return schema_in_prompt(system_texts) or {}


def structured_pieces(schema: Mapping[str, Any] | None, mode: str, prompt: str) -> list[str]:
    """The streamed pieces of a JSON answer in ``mode`` (not ``refusal``): the object of
    :func:`example_value` (``{"answer": ...}`` without a schema); for ``invalid`` without
    its first required property (every property when none is required); for ``truncated``
    the first half of the pieces."""
    if schema is not None:
        value = example_value(schema)
    else:
        value = {"answer": " ".join(prompt.split()[:8]) or "sim"}
    if mode == "invalid" and isinstance(value, dict):
        required = schema.get("required") if schema is not None else None
        if isinstance(required, list) and required:
            value.pop(required[0], None)
        else:
            value = []
    text = json.dumps(value, ensure_ascii=False)
    pieces = [text[i : i + _PIECE] for i in range(0, len(text), _PIECE)]
    if mode == "truncated":
        pieces = pieces[: max(1, len(pieces) // 2)]
    return pieces


def strict_schema_problem(schema: Any) -> str | None:
    """What OpenAI's strict mode says about ``schema`` (the first problem), in its own
    words, or ``None`` when it takes it: every object's ``required`` lists every property and
    ``additionalProperties`` is false; no ``default``, ``oneOf`` or ``allOf``; a ``$ref``
    stands alone (observed 400 texts, STRUCTURED.md §1.2)."""

    def walk(node: Any, context: tuple[str, ...]) -> str | None:
        if not isinstance(node, Mapping):
            return None
        where = f"In context={context!r}, "
        if "$ref" in node and len(node) > 1:
            extra = {key for key in node if key != "$ref"}
            return f"{where}$ref cannot have keywords {extra!r}."
        for key in ("default", "oneOf", "allOf", "not"):
            if key in node:
                return f"{where}'{key}' is not permitted."
        properties = node.get("properties")
        if node.get("type") == "object" or isinstance(properties, Mapping):
            if node.get("additionalProperties") is not False:
                return f"{where}'additionalProperties' is required to be supplied and to be false."
            required = node.get("required") or []
            for name in properties or {}:
                if name not in required:
                    return (
                        f"{where}'required' is required to be supplied and to be an array "
                        f"including every key in properties. Missing '{name}'."
                    )
        for key, child in node.items():
            if key in ("properties", "$defs", "definitions") and isinstance(child, Mapping):
                for name, sub in child.items():
                    found = walk(sub, (*context, key, name))
                    if found:
                        return found
            elif key in ("anyOf",) and isinstance(child, list):
                for i, sub in enumerate(child):
                    found = walk(sub, (*context, key, str(i)))
                    if found:
                        return found
            elif key == "items":
                found = walk(child, (*context, key))
                if found:
                    return found
        return None

    return walk(schema, ())


def message_texts(messages: Sequence[Any]) -> list[str]:
    """The text of each OpenAI-shaped message or Responses input item (string content, or
    the ``text`` of its content parts)."""
    texts = []
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return texts


def strict_schema_error(spec: Mapping[str, Any], schema: Any, param: str) -> Any:
    """OpenAI's 400 body for a ``strict: true`` format whose schema strict mode refuses
    (:func:`strict_schema_problem`), else ``None``; ``spec`` holds its ``name``."""
    if spec.get("strict") is not True:
        return None
    problem = strict_schema_problem(schema)
    if problem is None:
        return None
    return openai_error(
        f"Invalid schema for response_format '{spec.get('name')}': {problem}",
        param=param,
        code="invalid_json_schema",
    )


def mentions_json(texts: Sequence[str]) -> bool:
    """Whether any text says "json", as JSON mode requires of the messages."""
    return any("json" in text.lower() for text in texts)
