"""``Message.to_dict`` / ``Message.from_dict`` and the JSON-lines conversation files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polythink import Message, MessageMetadata, ToolCall
from polythink.conversation import append_message, load_conversation, save_conversation
from polythink.middleware.cache import canonical_request
from polythink.types import Request

SIGNED = Message(
    role="assistant",
    content="The answer.",
    tool_calls=(ToolCall(id="toolu_1", name="lookup", arguments='{"q": "x"}'),),
    reasoning="Think first.",
    reasoning_items=(
        {"type": "thinking", "thinking": "Think first.", "signature": "EqQBCkYIBxgCKkA+/="},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
    ),
    reasoning_format="anthropic",
    metadata=MessageMetadata(
        provider="anthropic",
        model="claude-sonnet-4-5-20250929",
        source_index=1,
        started_at=1_796_000_000.125,
        duration=2.5,
    ),
)


def test_to_dict_is_the_chat_shape_plus_the_reasoning_fields() -> None:
    assert SIGNED.to_dict() == {
        "role": "assistant",
        "content": "The answer.",
        "tool_calls": [
            {
                "id": "toolu_1",
                "type": "function",
                "function": {"name": "lookup", "arguments": '{"q": "x"}'},
            }
        ],
        "reasoning": "Think first.",
        "reasoning_items": [
            {"type": "thinking", "thinking": "Think first.", "signature": "EqQBCkYIBxgCKkA+/="},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
        ],
        "reasoning_format": "anthropic",
        "metadata": {
            "provider": "anthropic",
            "model": "claude-sonnet-4-5-20250929",
            "source_index": 1,
            "started_at": 1_796_000_000.125,
            "duration": 2.5,
        },
    }
    assert Message(role="user", content="hi").to_dict() == {"role": "user", "content": "hi"}
    tool = Message(role="tool", tool_call_id="toolu_1", name="lookup", content="42")
    assert tool.to_dict() == {
        "role": "tool",
        "content": "42",
        "tool_call_id": "toolu_1",
        "name": "lookup",
    }


def test_a_json_round_trip_gives_back_an_identical_message() -> None:
    back = Message.from_dict(json.loads(json.dumps(SIGNED.to_dict())))
    assert back == SIGNED
    assert back.metadata == SIGNED.metadata
    assert back.reasoning_items == SIGNED.reasoning_items
    interrupted = Message(
        role="assistant", content="Half", metadata=MessageMetadata(interrupted=True)
    )
    assert interrupted.to_dict()["metadata"] == {"interrupted": True}
    assert Message.from_dict(interrupted.to_dict()).metadata == MessageMetadata(interrupted=True)


def test_to_dict_copies_so_the_message_cannot_be_changed_through_it() -> None:
    parts = Message(role="user", content=[{"type": "text", "text": "a"}])
    data = parts.to_dict()
    data["content"][0]["text"] = "changed"
    assert parts.content == [{"type": "text", "text": "a"}]
    items = SIGNED.to_dict()["reasoning_items"]
    items[0]["signature"] = "forged"
    assert SIGNED.reasoning_items[0]["signature"] == "EqQBCkYIBxgCKkA+/="


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"role": "user", "content": "x", "reasoning_content": "y"}, "unknown message keys"),
        ({"role": "robot", "content": "x"}, "unknown message role 'robot'"),
        ({"role": "user", "content": "x", "reasoning_items": "abc"}, "must be a list of dicts"),
        ({"role": "user", "content": "x", "metadata": {"cost": 1}}, "unknown message metadata"),
        (
            {"role": "assistant", "content": "x", "metadata": {"duration": "2s"}},
            "metadata duration must be seconds",
        ),
        (
            {"role": "assistant", "content": "x", "metadata": {"source_index": -1}},
            "source_index must be an int >= 0",
        ),
        ({"role": "tool", "content": "x"}, "needs the tool_call_id"),
        (["role", "user"], "a saved message must be a dict"),
    ],
)
def test_from_dict_rejects_what_to_dict_never_writes(data: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Message.from_dict(data)  # type: ignore[arg-type]


def test_coerce_accepts_a_saved_message_dict() -> None:
    assert Message.coerce(SIGNED.to_dict()).metadata == SIGNED.metadata


def test_metadata_stays_out_of_equality_and_the_cache_key() -> None:
    bare = Message(role="assistant", content="The answer.")
    stamped = Message(
        role="assistant",
        content="The answer.",
        metadata=MessageMetadata(provider="openai", started_at=1.0, duration=0.5),
    )
    assert bare == stamped
    assert canonical_request(Request(messages=(bare,))) == canonical_request(
        Request(messages=(stamped,))
    )


def test_save_append_and_load(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    save_conversation(path, [{"role": "user", "content": "héllo"}, SIGNED])
    append_message(path, Message(role="user", content="next"))
    loaded = load_conversation(path)
    assert loaded == [
        Message(role="user", content="héllo"),
        SIGNED,
        Message(role="user", content="next"),
    ]
    assert loaded[1].metadata == SIGNED.metadata
    text = path.read_text(encoding="utf-8")
    assert text.splitlines()[0] == '{"role":"user","content":"héllo"}'
    assert text.endswith("\n")
    # Saving again replaces the file whole and leaves no temporary file behind.
    save_conversation(path, [SIGNED])
    assert load_conversation(path) == [SIGNED]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["session.jsonl"]


def test_a_bad_line_is_reported_with_its_number(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    path.write_text('{"role": "user", "content": "ok"}\n\n{"role": "user", "colour": 1}\n')
    with pytest.raises(ValueError, match=r"session.jsonl:3: not a saved message: unknown"):
        load_conversation(path)
    path.write_text("not json\n")
    with pytest.raises(ValueError, match=r"session.jsonl:1: not a saved message"):
        load_conversation(path)
