"""A system message the caller puts after the conversation began stays where the caller put it.

Moved into the top-level system prompt (as every wire but Chat and Responses did), it changes
the start of every later request: the prompt cache misses the whole conversation and, on the
newest Claude models, every replayed thinking block fails the prefix check ("Leave a
role:system message where the caller put it", CONTINUITY.md §1.9). Each test sends two calls
of one conversation against the simulator, which enforces Anthropic's placement rules for
mid-conversation system messages (CONTINUITY.md §2.3), and compares the bodies whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from polythink import Client, Message, Source
from polythink.simulator import Settings, Simulator
from polythink.simulator.clouds import AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY

botocore_credentials = pytest.importorskip("botocore.credentials")

pytestmark = pytest.mark.anyio

FIRST = Message(role="system", content="Be careful.")
LATER = Message(role="system", content="The user is now on a phone: be brief.")


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(Settings(answer_words=3)) as simulator:
        yield simulator


async def _two_calls(
    sim: Simulator, provider: str, model: str, first: list[Message], **options: Any
) -> tuple[list[dict[str, Any]], list[list[str]], list[Message]]:
    """Send ``first``, then it with the answer and one more user turn appended: the bodies,
    each call's warnings, and the second call's messages."""
    bodies: list[dict[str, Any]] = []

    async def record(request: httpx.Request) -> None:
        bodies.append(json.loads(request.content))

    options = options or {"api_key": "sim"}
    source = Source(provider, model, base_url=sim.base_url(provider), **options)
    http = httpx.AsyncClient(event_hooks={"request": [record]})
    warnings = []
    async with http, Client([source], http_client=http, cache=False) as client:
        answer = await client.complete(first)
        warnings.append(answer.warnings)
        second = [*first, answer.message, Message(role="user", content="And then?")]
        answer = await client.complete(second)
        warnings.append(answer.warnings)
    return bodies, warnings, second


def _anthropic_turns(body: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(m["role"], m["content"]) for m in body["messages"]]


async def test_anthropic_keeps_a_later_system_message_in_place(sim: Simulator) -> None:
    # claude-opus-5-5 takes mid-conversation system messages; the later one follows a user
    # turn and is last, then followed by the assistant's answer: both calls keep it in place.
    first = [FIRST, Message(role="user", content="Hi"), LATER]
    bodies, warnings, _ = await _two_calls(sim, "anthropic", "claude-opus-5-5", first)
    assert [body["system"] for body in bodies] == ["Be careful.", "Be careful."]
    assert bodies[0]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
        {"role": "system", "content": LATER.content},
    ]
    # The first request is the unchanged prefix of the second.
    assert bodies[1]["messages"][:2] == bodies[0]["messages"]
    assert [role for role, _ in _anthropic_turns(bodies[1])] == [
        "user",
        "system",
        "assistant",
        "user",
    ]
    assert warnings == [[], []]


async def test_anthropic_sends_a_later_system_message_after_an_answer_as_user_text(
    sim: Simulator,
) -> None:
    # After an assistant turn a mid-conversation system message is refused (it must follow a
    # user turn): its text goes as a user turn of its own, which the API joins with the next.
    first = [
        FIRST,
        Message(role="user", content="Hi"),
        Message(role="assistant", content="Hello."),
        LATER,
        Message(role="user", content="Where is it?"),
    ]
    bodies, warnings, _ = await _two_calls(sim, "anthropic", "claude-opus-5-5", first)
    later_turn = {"role": "user", "content": [{"type": "text", "text": LATER.content}]}
    assert bodies[0]["system"] == "Be careful."
    assert bodies[0]["messages"][2] == later_turn
    assert bodies[1]["messages"][: len(bodies[0]["messages"])] == bodies[0]["messages"]
    note = (
        "not sent to anthropic: the system role of message 3 (sent as user text in its "
        "place: the model takes no mid-conversation system message, or not there (one must "
        "follow a user turn and be last or followed by an assistant turn); moved into the "
        "system prompt it would change the start of every later request)"
    )
    assert warnings == [[note], [note]]


async def test_a_claude_model_without_mid_conversation_system_messages_gets_user_text(
    sim: Simulator,
) -> None:
    # claude-haiku-4-5 takes no mid-conversation system message (the simulator refuses one).
    first = [FIRST, Message(role="user", content="Hi"), LATER]
    bodies, warnings, _ = await _two_calls(sim, "anthropic", "claude-haiku-4-5", first)
    assert bodies[0]["system"] == bodies[1]["system"] == "Be careful."
    assert bodies[0]["messages"][1] == {
        "role": "user",
        "content": [{"type": "text", "text": LATER.content}],
    }
    assert bodies[1]["messages"][:2] == bodies[0]["messages"]
    assert all(
        w[0].startswith("not sent to anthropic: the system role of message 2") for w in warnings
    )


async def test_gemini_sends_a_later_system_message_as_a_user_turn_in_place(
    sim: Simulator,
) -> None:
    first = [
        FIRST,
        Message(role="user", content="Hi"),
        Message(role="assistant", content="Hello."),
        LATER,
    ]
    bodies, warnings, _ = await _two_calls(sim, "gemini", "gemini-4-argon", first)
    for body in bodies:
        assert body["systemInstruction"] == {"role": "user", "parts": [{"text": "Be careful."}]}
    assert bodies[0]["contents"] == [
        {"role": "user", "parts": [{"text": "Hi"}]},
        {"role": "model", "parts": [{"text": "Hello."}]},
        {"role": "user", "parts": [{"text": LATER.content}]},
    ]
    assert bodies[1]["contents"][:3] == bodies[0]["contents"]
    assert warnings[0] == [
        "not sent to gemini: the system role of message 3 (sent as user text in its place: "
        "Gemini's contents have no system role; moved into the system prompt it would change "
        "the start of every later request)"
    ]


@pytest.mark.parametrize("provider", ["openai", "openai-responses"])
async def test_openai_wires_keep_a_later_system_message_as_a_message(
    sim: Simulator, provider: str
) -> None:
    first = [
        FIRST,
        Message(role="user", content="Hi"),
        Message(role="assistant", content="Hello."),
        LATER,
    ]
    bodies, warnings, _ = await _two_calls(sim, provider, "gpt-5.5", first)
    entries = "messages" if provider == "openai" else "input"
    later = [e for e in bodies[1][entries] if e.get("role") == "system"]
    assert later[-1]["content"] in (LATER.content, [{"type": "input_text", "text": LATER.content}])
    assert bodies[1][entries][: len(bodies[0][entries])] == bodies[0][entries]
    assert warnings == [[], []]


async def test_converse_sends_a_later_system_message_as_user_text(sim: Simulator) -> None:
    first = [
        FIRST,
        Message(role="user", content="Hi"),
        Message(role="assistant", content="Hello."),
        LATER,
        Message(role="user", content="Where is it?"),
    ]
    bodies, _, _ = await _two_calls(
        sim,
        "bedrock",
        "amazon.nova-pro-v1:0",
        first,
        region="us-east-1",
        credentials=botocore_credentials.Credentials(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY),
    )
    assert bodies[0]["system"] == [{"text": "Be careful."}]
    # Converse alternates roles: the later system text and the next user words are one turn.
    assert bodies[0]["messages"][2] == {
        "role": "user",
        "content": [{"text": LATER.content}, {"text": "Where is it?"}],
    }
    assert bodies[1]["messages"][:3] == bodies[0]["messages"]
