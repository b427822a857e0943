"""The fast paths send the same bytes and compute the same cache keys as the plain code.

For every recorded exchange in ../shared/fixtures/real, a conversation is built from the
recorded request's messages, the assistant turn parsed from the recorded answer and a new
user turn. On every wire (OpenAI Chat with the dialects whose message bodies differ,
OpenAI Responses, Anthropic, Gemini) the body polythink sends and the request's cache key
are compared with a reference computed the plain way, kept here: messages built through the
dataclass constructor (the coercion as it was before its fast path), each message's body
converted afresh, the body encoded by ``json.dumps``, the key hashed over the whole
:func:`canonical_request`. Each comparison is made three times: on messages coerced from
dicts (first conversion), on the same Message values again (the memoised shapes and bytes),
on the same dicts passed again (their remembered conversions), on the dicts with the last one
replaced (a prompt asked again differently: hashing resumed before it), and on the
conversation grown by two messages (an agent loop's next turn: resumed hashing).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import httpx
import pytest

from polythink.cache_key import KEY_VERSION as _KEY_VERSION
from polythink.config import Source
from polythink.conversion import coerce_messages, coerce_tools
from polythink.errors import PolythinkError
from polythink.middleware.cache import CacheMiddleware, canonical_request
from polythink.providers import get_provider
from polythink.transports import anthropic, gemini, openai_chat, openai_responses, transport_class
from polythink.transports.base import append_system_suffix, dumps
from polythink.transports.instructions import after_conversation, instruction_plan
from polythink.types import Effort, Message, PromptCache, Request, Response, Tool, ToolCall
from tests.cassettes import Cassette, Interaction
from tests.conftest import REAL, shared_file

pytestmark = pytest.mark.fixture_replay

PROVIDERS = (
    "openai",
    "deepseek",
    "openrouter",
    "ollama",
    "openai-responses",
    "anthropic",
    "gemini",
)
"""One provider per wire, and the OpenAI Chat dialects whose message bodies differ
(reasoning sent back as ``reasoning_content``, as ``reasoning``, OpenRouter's details)."""

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look up a record — by id.",
            "parameters": {
                "type": "object",
                "properties": {"id": {"type": "string"}, "ratio": {"type": "number"}},
                "required": ["id"],
            },
        },
    }
]


def _recordings() -> list[Path]:
    directory = shared_file(REAL)
    return sorted(directory.glob("*.yaml"))


def _reference_json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _reference_message(value: Message | Mapping[str, Any]) -> Message:
    """``Message.coerce`` as it was before its fast path: through the constructor."""
    if isinstance(value, Message):
        return value
    raw_calls = value.get("tool_calls") or ()
    calls = tuple(c if isinstance(c, ToolCall) else ToolCall.from_openai(c) for c in raw_calls)
    reasoning = value.get("reasoning_content")
    if reasoning is None and isinstance(value.get("reasoning"), str):
        reasoning = value.get("reasoning")
    items: tuple[Mapping[str, Any], ...] = ()
    fmt = value.get("reasoning_format")
    details = value.get("reasoning_details")
    if details:
        items, fmt = tuple(details), fmt or "openrouter"
    elif value.get("reasoning_items"):
        items = tuple(value["reasoning_items"])
    return Message(
        role=value["role"],
        content=value.get("content"),
        tool_calls=calls,
        tool_call_id=value.get("tool_call_id"),
        name=value.get("name"),
        reasoning=reasoning,
        reasoning_items=items,
        reasoning_format=fmt,
    )


def _reference_key(layer: CacheMiddleware, request: Request) -> str:
    """The key as it was computed before: one SHA-256 over the whole canonical JSON (with
    each source's effective tier, as the layer keys it)."""
    digest = hashlib.sha256(_KEY_VERSION)
    digest.update(layer._scope)
    digest.update(b"\n")
    digest.update(canonical_request(request, layer._defaults).encode())
    return digest.hexdigest()


def _as_dicts(messages: list[Message]) -> list[dict[str, Any]]:
    """OpenAI-style dicts that coerce back to ``messages`` (reasoning items kept)."""
    out = []
    for m in messages:
        d: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.tool_calls:
            d["tool_calls"] = [c.to_openai() for c in m.tool_calls]
        if m.tool_call_id is not None:
            d["tool_call_id"] = m.tool_call_id
        if m.name is not None:
            d["name"] = m.name
        if m.reasoning is not None:
            d["reasoning_content"] = m.reasoning
        if m.reasoning_items:
            d["reasoning_items"] = [dict(i) for i in m.reasoning_items]
            d["reasoning_format"] = m.reasoning_format
        out.append(d)
    return out


def _recorded_turns(recorded: Interaction) -> list[dict[str, Any]]:
    """The recorded request's conversation as OpenAI-style dicts (what a caller passes)."""
    body = recorded.request_body
    if not isinstance(body, dict):
        return []
    turns: list[dict[str, Any]] = []
    system = body.get("system") or body.get("instructions")
    if isinstance(system, str):
        turns.append({"role": "system", "content": system})
    for message in body.get("messages") or ():
        if isinstance(message, dict) and message.get("role") in ("system", "user", "assistant"):
            content = message.get("content")
            if isinstance(content, str | list) and not message.get("tool_calls"):
                turns.append({"role": message["role"], "content": content})
    for content in body.get("contents") or ():
        texts = [p["text"] for p in content.get("parts", ()) if isinstance(p.get("text"), str)]
        if texts:
            role = "assistant" if content.get("role") == "model" else "user"
            turns.append({"role": role, "content": "".join(texts)})
    if isinstance(body.get("input"), str):
        turns.append({"role": "user", "content": body["input"]})
    return turns


def _recorded_answer(recorded: Interaction) -> Message | None:
    """The assistant turn parsed from a recorded JSON answer, with its reasoning items."""
    data = recorded.response_json
    if recorded.status != 200 or not isinstance(data, dict):
        return None
    uri = recorded.uri
    try:
        if "generativelanguage" in uri:
            profile = get_provider("gemini")
            parsed = gemini.parse_response(data, profile=profile, source_index=0, model="m")
        elif "/messages" in uri:
            profile = get_provider("anthropic")
            parsed = anthropic.parse_message(data, profile=profile, source_index=0, model="m")
        elif "/responses" in uri:
            profile = get_provider("openai-responses")
            parsed = openai_responses.parse_response(
                data, profile=profile, source_index=0, model="m"
            )
        elif "chat/completions" in uri:
            provider = "openrouter" if "openrouter" in uri else "openai"
            profile = get_provider(provider)
            parsed = openai_chat.parse_completion(data, profile=profile, source_index=0, model="m")
        else:
            return None
    except PolythinkError:
        return None
    return parsed.message


def _conversations() -> list[tuple[str, list[dict[str, Any]]]]:
    cases = []
    for path in _recordings():
        for index, recorded in enumerate(Cassette.load(path).interactions):
            turns = _recorded_turns(recorded)
            answer = _recorded_answer(recorded)
            if answer is not None:
                turns.extend(_as_dicts([answer]))
                if answer.tool_calls:
                    turns.extend(
                        {"role": "tool", "tool_call_id": c.id, "content": '{"ok":true}'}
                        for c in answer.tool_calls
                    )
            if not turns:
                continue
            turns.append({"role": "user", "content": "Next — and thanks. ✓"})
            cases.append((f"{path.name}#{index}", turns))
    return cases


def _transport(provider: str) -> Any:
    profile = get_provider(provider)
    source = Source(provider, "test-model", api_key="k", base_url="http://127.0.0.1:1/v1")
    return transport_class(profile.wire)(
        source=source, index=0, profile=profile, client=httpx.AsyncClient(), api_key="k"
    )


def _reference_body(transport: Any, request: Request) -> dict[str, Any]:
    body: dict[str, Any] = transport.body(request)
    if transport.profile.wire == "openai_chat":
        # The message bodies converted afresh, as before they were memoised (the recorded
        # conversations have no tool results with images, the one case that adds a turn).
        messages = [openai_chat._message_body(m, transport.profile, []) for m in request.messages]
        if request.system_suffix:
            plan = instruction_plan(transport.profile, transport.source.model)
            if plan.placement == "system":
                append_system_suffix(messages, request.system_suffix, "text")
            else:
                after_conversation(messages, request.system_suffix, plan.placement)
        body["messages"] = messages
    return body


def _outcome(build: Any) -> tuple[str, Any]:
    try:
        return "ok", build()
    except (PolythinkError, ValueError) as exc:
        return type(exc).__name__, str(exc)


def test_every_recording_yields_conversations() -> None:
    cases = _conversations()
    assert len(cases) >= 20
    # Reasoning items from Anthropic, Responses and Gemini answers are among them.
    kinds = {m.get("reasoning_format") for _, turns in cases for m in turns}
    assert {"anthropic", "openai-responses", "gemini"} <= kinds


def test_recorded_request_bodies_encode_to_the_same_bytes() -> None:
    bodies = [
        recorded.request_body
        for path in _recordings()
        for recorded in Cassette.load(path).interactions
        if isinstance(recorded.request_body, dict)
    ]
    assert len(bodies) >= 20
    for body in bodies:
        assert dumps(body) == _reference_json(body)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_bodies_and_keys_match_the_plain_code_on_every_recording(provider: str) -> None:
    transport = _transport(provider)
    source = transport.source
    layer = CacheMiddleware(_DictStore(), [source])
    tools = coerce_tools(TOOLS)
    checked = 0
    for name, turns in _conversations():
        reference = tuple(_reference_message(t) for t in turns)
        fast = coerce_messages(turns)
        assert fast == reference, name
        # The same dicts again: the remembered conversions (all but the last message).
        remembered = coerce_messages(turns)
        assert remembered == reference, name
        replaced_turns = [*turns[:-1], {"role": "user", "content": "Another — last."}]
        replaced = coerce_messages(replaced_turns)
        reference_replaced = (*reference[:-1], _reference_message(replaced_turns[-1]))
        grown = (
            *fast,
            Message(role="assistant", content="Done."),
            Message(role="user", content="And then?"),
        )
        reference_grown = (*reference, *grown[-2:])
        for messages, expected_messages in (
            (fast, reference),
            (fast, reference),
            (remembered, reference),
            (replaced, reference_replaced),
            (grown, reference_grown),
        ):
            # The grown turn also sets the optional fields that sort after the messages.
            extra: dict[str, Any] = (
                {"system_suffix": "Plan: B.", "prompt_cache": PromptCache(key="k")}
                if messages is grown
                else {}
            )
            request = Request(messages=messages, tools=tools, temperature=0.5, **extra)
            expected = Request(messages=expected_messages, tools=tools, temperature=0.5, **extra)
            sent = _outcome(lambda r=request: dumps(transport.body(r)))
            wanted = _outcome(lambda r=expected: _reference_json(_reference_body(transport, r)))
            assert sent == wanted, name
            assert layer.key(request) == _reference_key(layer, expected), name
        checked += 1
    assert checked >= 20


def test_a_system_suffix_leaves_the_memoised_messages_alone() -> None:
    stable = [{"role": "system", "content": "Stable."}, {"role": "user", "content": "hi"}]
    messages = coerce_messages(stable)
    openai = _transport("openai")
    with_suffix = openai.body(Request(messages=messages, system_suffix="Plan: A."))
    again = openai.body(Request(messages=messages, system_suffix="Plan: B."))
    plain = openai.body(Request(messages=messages))
    assert with_suffix["messages"] == [*stable, {"role": "system", "content": "Plan: A."}]
    assert again["messages"] == [*stable, {"role": "system", "content": "Plan: B."}]
    assert plain["messages"] == stable
    # Where the suffix ends the last user message, the memoised body is copied, not changed.
    deepseek = _transport("deepseek")
    ended = deepseek.body(Request(messages=messages, system_suffix="Plan: A."))
    assert ended["messages"][-1] == {"role": "user", "content": "hi\n\nPlan: A."}
    assert deepseek.body(Request(messages=messages))["messages"] == stable


def test_a_message_keeps_what_was_derived_from_it() -> None:
    message = Message(role="user", content="hi")
    calls: list[str] = []

    def derive(m: Message) -> str:
        calls.append(m.role)
        return f"derived {m.content}"

    assert message.memo("a", derive) == "derived hi"
    assert message.memo("a", derive) == "derived hi"
    assert message.memo("b", derive) == "derived hi"
    assert message.memo("a", derive) == "derived hi"
    assert calls == ["user", "user"]
    # A derived copy starts afresh; the memo is not part of equality or the repr.
    changed = dataclasses.replace(message, content="bye")
    assert changed.memo("a", derive) == "derived bye"
    assert Message(role="user", content="hi") == message
    assert "memo" not in repr(message)


def test_an_agent_loop_hashes_only_its_new_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    from polythink import cache_key as cache

    encoded: list[str | list[Any] | None] = []
    real = cache._plain_message

    def counting(message: Message) -> dict[str, Any] | None:
        encoded.append(message.content)
        return real(message)

    monkeypatch.setattr(cache, "_plain_message", counting)
    layer = CacheMiddleware(_DictStore(), [_transport("openai").source])
    conversation = list(coerce_messages([{"role": "user", "content": "turn 0"}]))
    for turn in range(1, 6):
        request = Request(messages=tuple(conversation))
        assert layer.key(request) == _reference_key(layer, request)
        conversation += [
            Message(role="assistant", content=f"answer {turn}"),
            Message(role="user", content=f"turn {turn}"),
        ]
    # Each message was encoded once, however many turns sent it.
    assert encoded == ["turn 0", *[x for t in range(1, 5) for x in (f"answer {t}", f"turn {t}")]]


def test_floats_orjson_writes_differently_keep_their_value() -> None:
    body = {"temperature": 1e-05, "x": [1e-07, 0.1, 1e16], "big": 2**70}
    sent = dumps(body)
    assert json.loads(sent) == body
    # An integer beyond 64 bits goes through json, which writes it exactly.
    assert sent == _reference_json(body)
    assert dumps({"t": 1e-05}) == b'{"t":0.00001}'


def test_tools_keep_their_order_and_floats_in_the_key() -> None:
    source = _transport("openai").source
    layer = CacheMiddleware(_DictStore(), [source])
    schema = {"type": "object", "properties": {"x": {"type": "number", "minimum": 1e-05}}}
    small = coerce_tools([{"name": "f", "parameters": schema}])
    request = Request(messages=coerce_messages([{"role": "user", "content": "x"}]), tools=small)
    assert layer.key(request) == _reference_key(layer, request)
    assert "1e-05" in canonical_request(request)
    assert isinstance(small[0], Tool)


@pytest.mark.parametrize(
    "value",
    [
        1e-05,
        1e16,
        0.1,
        2**70,
        -(2**63),
        float("nan"),
        float("inf"),
        {"b": [1.5, None, True], "a": "é"},
        MappingProxyType({"b": 1, "a": {"d": 2, "c": 1}}),
        ("t", 1),
        "\ud800",
    ],
)
def test_keys_of_awkward_values_match_or_fail_as_before(value: Any) -> None:
    layer = CacheMiddleware(_DictStore(), [_transport("openai").source])
    for where in ("extra_body", "tool_choice"):
        request = Request(
            messages=coerce_messages([{"role": "user", "content": "x", "name": "n"}]),
            **{where: {"x": value}},
        )
        try:
            expected: str | None = _reference_key(layer, request)
        except (TypeError, ValueError):
            expected = None
        assert layer.key(request) == expected


class _DictStore:
    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def get(self, key: str) -> Any:
        return self.data.get(key)

    def set(self, key: str, value: bytes, expire: float | None = None) -> None:
        self.data[key] = value

    def delete(self, key: str) -> None:
        self.data.pop(key, None)


_CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}


@pytest.mark.parametrize(
    "value",
    [
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "s", "name": "ops"},
        {"role": "developer", "content": ""},
        {"role": "assistant", "content": None, "tool_calls": [_CALL]},
        {"role": "assistant", "content": "", "tool_calls": [_CALL, {**_CALL, "id": "c2"}]},
        {"role": "assistant", "content": "text", "tool_calls": [_CALL]},
        {"role": "assistant", "content": "x", "tool_calls": []},
        {"role": "assistant", "content": None, "tool_calls": (_CALL,)},
        {"role": "assistant", "content": None, "tool_calls": [ToolCall(id="c", name="g")]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"ok":true}'},
        {"role": "user", "content": [{"type": "text", "text": "parts"}]},
        {"role": "assistant", "content": "x", "reasoning_content": "why"},
    ],
)
def test_dicts_coerce_to_what_the_constructor_builds(value: dict[str, Any]) -> None:
    fast = Message.coerce(value)
    reference = _reference_message(value)
    assert fast == reference
    assert repr(fast) == repr(reference)
    assert type(fast) is Message
    assert [type(c) for c in fast.tool_calls] == [ToolCall] * len(reference.tool_calls)
    assert fast.metadata is None
    assert hash(fast.role) == hash(reference.role)
    # A value built on the fast path is as frozen and as derivable as any other.
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.content = "changed"  # type: ignore[misc]
    if fast.tool_calls:
        with pytest.raises(dataclasses.FrozenInstanceError):
            fast.tool_calls[0].name = "changed"  # type: ignore[misc]
    assert dataclasses.replace(fast, name="n") == dataclasses.replace(reference, name="n")
    assert fast.memo("x", lambda m: m.role) == reference.role
    assert Message.from_dict(fast.to_dict()) == reference


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ({"role": "tool", "content": "x"}, "a tool message needs the tool_call_id"),
        ({"role": "tool", "content": "x", "tool_call_id": ""}, "a tool message needs the"),
        ({"role": "tool", "content": "x", "tool_call_id": 5}, "a tool message needs the"),
        (
            {"role": "assistant", "content": None, "tool_calls": []},
            "assistant message has no content: it needs 'content'",
        ),
        ({"role": "user", "content": None}, "user message has no content"),
        ({"role": "robot", "content": "x"}, "unknown message role 'robot'"),
        ({"role": ["user"], "content": "x"}, "a message needs a 'role' string"),
        ({"content": "x"}, "a message needs a 'role' string"),
        ({"role": "user", "content": 5}, "message content must be a string"),
        (
            {"role": "user", "content": "x", "tool_calls": "abc"},
            "a message's tool_calls must be a list",
        ),
        ({"role": "user", "contents": "x"}, "user message has unknown key(s) 'contents'"),
        (
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": {}}]},
            "a tool call needs a function name",
        ),
        ({"role": "user", "content": "x", "name": 7}, "user message name must be a string"),
        ({"role": "user", "content": "x", "tool_call_id": "c1"}, "user message has tool_call_id"),
    ],
)
def test_dicts_the_fast_path_refuses_fail_as_before(value: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(error)):
        Message.coerce(value)


def test_with_copies_as_dataclasses_replace_does() -> None:
    response = Response(
        text="x",
        reasoning="r",
        tool_calls=[ToolCall(id="c", name="f")],
        finish_reason="stop",
        usage=None,
        model="m",
        provider="openai",
        source_index=1,
        message=Message(role="assistant", content="x"),
        warnings=["w"],
    )
    for changes in ({}, {"model": "n", "warnings": []}, {"cache_hit": True, "parsed": {"a": 1}}):
        copied = response.with_(**changes)
        assert type(copied) is Response
        assert repr(copied) == repr(dataclasses.replace(response, **changes))
        assert copied is not response
    with pytest.raises(dataclasses.FrozenInstanceError):
        response.with_(model="n").model = "o"  # type: ignore[misc]
    with pytest.raises(TypeError, match="unexpected keyword argument 'modle'"):
        response.with_(modle="n")
    request = Request(messages=coerce_messages([{"role": "user", "content": "x"}]), timeout=2.0)
    assert repr(request.with_(timeout=1.0)) == repr(dataclasses.replace(request, timeout=1.0))
    with pytest.raises(TypeError, match="unexpected keyword argument 'timout'"):
        request.with_(timout=1.0)


def test_keys_of_calls_alike_but_for_one_field_match_the_plain_code() -> None:
    # The bytes around the messages are kept by the values of the other fields: every
    # field that changes them must change the key, and none may stand in for another.
    layer = CacheMiddleware(_DictStore(), [_transport("openai").source])
    messages = coerce_messages([{"role": "user", "content": "x"}])
    tools = coerce_tools(TOOLS)
    variants: list[dict[str, Any]] = [
        {},
        {"max_tokens": 1},
        {"max_tokens": True},
        {"temperature": 0},
        {"temperature": 0.0},
        {"temperature": 1},
        {"temperature": True},
        {"top_p": 0.5},
        {"stop": ("a",)},
        {"stop": ("a", "b")},
        {"tool_choice": "auto"},
        {"tool_choice": {"type": "function", "function": {"name": "lookup"}}},
        {"tools": tools},
        {"tools": tools, "tool_choice": "required"},
        {"stream": True},
        {"reasoning_effort": Effort.LOW},
        {"reasoning_effort": Effort.HIGH},
        {"system_suffix": "s"},
        {"prompt_cache": PromptCache(key="k")},
        {"extra_body": {"seed": 1}},
        {"extra_headers": {"x-a": "1"}},
    ]
    keys = []
    for _ in range(2):
        for changes in variants:
            request = Request(messages=messages, **changes)
            key = layer.key(request)
            assert key == _reference_key(layer, request), changes
            keys.append(key)
    assert keys[: len(variants)] == keys[len(variants) :]
    # 0 and 0.0 put the same value on the wire; True is written otherwise than 1.
    first = keys[: len(variants)]
    assert first[3] == first[4] != first[0]
    assert first[1] != first[2]
