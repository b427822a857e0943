"""Dicts and tools passed again are not converted again, and never stand for what changed.

A conversation kept as OpenAI-style dicts is passed whole on every call; its messages are
converted and checked the first time and remembered with a copy of what was checked
(``polythink.conversion.coerce_messages``), and so is a list of tools (``coerce_tools``). These
tests hold the promise of the docstrings: the same values come back for what did not change,
and anything changed (in place or not, nested or not) is converted and checked again, with
the same result and the same errors as a first conversion.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import pytest

from polythink.cache_key import Prefixes, canonical_json, message_fields
from polythink.conversion import coerce_messages, coerce_tools, tools_memo
from polythink.providers import get_provider
from polythink.transports.base import dumps
from polythink.transports.openai_chat import build_body
from polythink.types import Message, Request, Tool

_CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}


def _conversation() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Look — here."}]},
        {"role": "assistant", "content": None, "tool_calls": [copy.deepcopy(_CALL)]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"ok":true}'},
        {"role": "user", "content": "And now?"},
    ]


def _fresh(turns: list[dict[str, Any]]) -> tuple[Message, ...]:
    """What a first conversion gives: each dict through ``Message.coerce``."""
    return tuple(Message.coerce(copy.deepcopy(t)) for t in turns)


def test_dicts_sent_again_give_back_the_messages_of_the_first_call() -> None:
    turns = _conversation()
    first = coerce_messages(turns)
    again = coerce_messages(turns)
    assert again == first == _fresh(turns)
    # Every message but the last is remembered; the last one once it is sent not last.
    assert [a is b for a, b in zip(first, again, strict=True)] == [True] * 4 + [False]
    turns.append({"role": "assistant", "content": "Done."})
    third = coerce_messages(turns)
    fourth = coerce_messages(turns)
    assert third[4] is fourth[4]
    assert third == fourth == _fresh(turns)


def test_a_message_keeps_nothing_of_the_callers_dicts() -> None:
    turns = _conversation()
    coerce_messages(turns)
    remembered = coerce_messages(turns)
    # The remembered message was built from a copy: changing the caller's list in place
    # cannot reach it.
    turns[1]["content"][0]["text"] = "Changed."
    assert remembered[1].content == [{"type": "text", "text": "Look — here."}]


@pytest.mark.parametrize(
    ("index", "change", "expected"),
    [
        (0, lambda m: m.update(content="Be verbose."), "Be verbose."),
        (1, lambda m: m["content"][0].update(text="Other text."), "Other text."),
        (1, lambda m: m["content"].append({"type": "text", "text": "More."}), "More."),
        (2, lambda m: m["tool_calls"][0]["function"].update(arguments="{}"), "{}"),
        (3, lambda m: m.update(content='{"ok":false}'), '{"ok":false}'),
        (0, lambda m: m.pop("content") and m.update(content="Again."), "Again."),
    ],
)
def test_a_dict_changed_in_place_is_converted_again(index: int, change: Any, expected: str) -> None:
    turns = _conversation()
    coerce_messages(turns)
    coerce_messages(turns)
    change(turns[index])
    after = coerce_messages(turns)
    assert after == _fresh(turns)
    assert expected in repr(after[index])
    # And the body on the wire says it.
    body = build_body(Request(messages=after), model="m", profile=get_provider("openai"))
    assert expected in repr(body["messages"][index])


def test_a_dict_changed_into_a_bad_one_is_refused_as_a_first_conversion_is() -> None:
    turns = _conversation()
    coerce_messages(turns)
    coerce_messages(turns)
    turns[1]["content"][0] = {"type": "text", "txt": "typo"}
    part = r"^messages\[1\]: user message content part 0 \(text\) has no 'text' string"
    with pytest.raises(ValueError, match=part) as caught:
        coerce_messages(turns)
    with pytest.raises(ValueError, match=part) as first:
        coerce_messages(copy.deepcopy(turns))
    assert str(caught.value) == str(first.value)
    turns[3]["tool_call_id"] = ""
    turns[1]["content"][0] = {"type": "text", "text": "fixed"}
    with pytest.raises(ValueError, match=r"^messages\[3\]: a tool message needs the tool_call_id"):
        coerce_messages(turns)


def test_a_replaced_dict_at_the_same_place_is_converted() -> None:
    turns = _conversation()
    coerce_messages(turns)
    coerce_messages(turns)
    turns[0] = {"role": "system", "content": "New rules."}
    assert coerce_messages(turns)[0].content == "New rules."


@pytest.mark.parametrize(
    "value",
    [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u", "n": 1.0}}]},
        {"role": "assistant", "content": None, "tool_calls": (_CALL,)},
    ],
)
def test_a_dict_holding_other_values_than_json_text_is_converted_every_time(
    value: dict[str, Any],
) -> None:
    # 1 == 1.0 == True: a changed number could compare equal, so such a dict is not kept.
    turns = [value, {"role": "user", "content": "next"}]
    first = coerce_messages(turns)
    again = coerce_messages(turns)
    assert first == again
    assert first[0] is not again[0]


def test_a_conversation_replacing_its_last_message_hashes_only_that_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from polythink import cache_key

    def plain(start: bytes, messages: tuple[Message, ...]) -> str:
        parts = [canonical_json(message_fields(m)).encode() for m in messages]
        return hashlib.sha256(start + b",".join(parts)).hexdigest()

    encoded: list[Any] = []
    real = cache_key._plain_message

    def counting(message: Message) -> dict[str, Any] | None:
        encoded.append(message.content)
        return real(message)

    monkeypatch.setattr(cache_key, "_plain_message", counting)
    turns = [
        {"role": "system", "content": "s"},
        *({"role": "user", "content": f"q{i}"} for i in range(4)),
    ]
    prefixes = Prefixes()
    for prompt in ("a", "b", "c"):
        turns[-1] = {"role": "user", "content": prompt}
        messages = coerce_messages(turns)
        assert prefixes.resume(b"head", messages).hexdigest() == plain(b"head", messages)
    # The first call encodes every message; each later one its new last message only.
    assert encoded == ["s", "q0", "q1", "q2", "a", "b", "c"]


_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a record up.",
            "parameters": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "limit": {"type": "integer", "minimum": 1},
                },
                "required": ["id"],
            },
        },
    }
]


def test_tools_sent_again_give_back_the_same_tuple_and_what_was_derived() -> None:
    tools = copy.deepcopy(_TOOLS)
    first = coerce_tools(tools)
    assert coerce_tools(tools) is first
    assert coerce_tools(copy.deepcopy(_TOOLS)) is first
    calls: list[int] = []

    def derive(t: tuple[Tool, ...]) -> int:
        calls.append(1)
        return len(t)

    assert tools_memo(first, "n", derive) == tools_memo(first, "n", derive) == 1
    assert calls == [1]
    # A tuple built by hand is derived afresh each time.
    own = (Tool(name="x"),)
    tools_memo(own, "n", derive)
    tools_memo(own, "n", derive)
    assert len(calls) == 3


@pytest.mark.parametrize(
    "change",
    [
        lambda t: t[0]["function"]["parameters"]["properties"]["limit"].update(minimum=1.0),
        lambda t: t[0]["function"]["parameters"]["properties"]["limit"].update(minimum=True),
        lambda t: t[0]["function"].update(description="Changed."),
        lambda t: t[0]["function"]["parameters"]["required"].append("limit"),
        lambda t: t.append({"name": "other"}),
    ],
)
def test_tools_changed_in_place_are_converted_again(change: Any) -> None:
    tools = copy.deepcopy(_TOOLS)
    first = coerce_tools(tools)
    change(tools)
    after = coerce_tools(tools)
    assert after is not first
    assert after == tuple(Tool.coerce(copy.deepcopy(t)) for t in tools)
    profile = get_provider("openai")
    messages = coerce_messages([{"role": "user", "content": "x"}])
    body = build_body(Request(messages=messages, tools=after), model="m", profile=profile)
    fresh = tuple(Tool.coerce(copy.deepcopy(t)) for t in tools)
    plain = build_body(Request(messages=messages, tools=fresh), model="m", profile=profile)
    assert dumps(body) == dumps(plain)
    assert dumps(body["tools"]) == dumps(
        [{"type": "function", "function": {**_function(t)}} for t in tools]
    )


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    spec = tool.get("function", tool)
    return {
        "name": spec["name"],
        "description": spec.get("description", ""),
        "parameters": spec.get("parameters", {"type": "object", "properties": {}}),
    }


def test_a_tool_changed_into_a_bad_one_is_refused() -> None:
    tools = copy.deepcopy(_TOOLS)
    coerce_tools(tools)
    tools[0]["function"]["parameters"]["type"] = "array"
    with pytest.raises(ValueError, match="parameters must be a JSON Schema object"):
        coerce_tools(tools)


def test_the_token_estimate_resumes_a_conversation_and_counts_what_is_new(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from polythink.middleware import ratelimit

    def plain(messages: tuple[Message, ...]) -> int:
        chars = 0
        for m in messages:
            chars += len(m.content) if isinstance(m.content, str) else len(m.text())
            chars += len(m.reasoning or "")
            chars += sum(len(c.name) + len(c.arguments) for c in m.tool_calls)
        return -(-chars // 4) + 3 * len(messages)

    counted: list[Message] = []
    real = ratelimit._message_chars

    def counting(message: Message) -> int:
        counted.append(message)
        return real(message)

    monkeypatch.setattr(ratelimit, "_message_chars", counting)
    turns = coerce_messages(_conversation())
    grown = (*turns, Message(role="assistant", content="Sure.", reasoning="think"))
    replaced = (*grown[:-1], Message(role="assistant", content="No."))
    other = coerce_messages([{"role": "user", "content": "Unrelated."}])
    for messages, new in (
        (turns, 5),
        (turns, 0),
        (grown, 1),
        (replaced, 1),
        (other, 1),
        (replaced, 0),
    ):
        counted.clear()
        assert ratelimit.estimate_prompt_tokens(Request(messages=messages)) == plain(messages)
        assert len(counted) == new


def test_a_conversation_sent_again_is_compared_whole_and_its_messages_given_back() -> None:
    turns = [
        {"role": "system", "content": "s"},
        *({"role": "user", "content": f"q{i}"} for i in range(6)),
    ]
    first = coerce_messages(turns)
    again = coerce_messages(turns)
    assert all(a is b for a, b in zip(first[:-1], again[:-1], strict=True))
    # Changed in the middle: converted again from there (and only that one differs).
    turns[3]["content"] = "changed"
    changed = coerce_messages(turns)
    assert changed == _fresh(turns)
    assert [a is b for a, b in zip(again, changed, strict=True)][:6] == [
        True,
        True,
        True,
        False,
        True,
        True,
    ]


def test_a_message_value_in_a_conversation_is_given_back_as_the_callers_own() -> None:
    # Equal messages may differ in metadata (never compared): the caller's object is kept.
    turns: list[Any] = [{"role": "user", "content": "q"}, Message(role="assistant", content="a")]
    turns.append({"role": "user", "content": "next"})
    coerce_messages(turns)
    coerce_messages(turns)
    other = Message(role="assistant", content="a", metadata={"model": "m2"})
    turns[1] = other
    assert coerce_messages(turns)[1] is other
