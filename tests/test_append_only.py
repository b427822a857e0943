"""Conversations stay append-only on every wire: exact request bodies of a tool loop.

Each test runs the first three turns of a tool loop with a ``system_suffix`` that changes
every call and ``prompt_cache`` on, against the simulator, records the JSON bodies polythink
sends, and compares each one whole with the body built by hand from what came before: the
conversation as sent, the answers' own items verbatim, and the call's instructions where
the wire takes them (polythink.transports.instructions). So each request is, but for its
newest per-call instructions, the unchanged prefix of the next; on Anthropic even those stay
(kept in place: Message.instructions), as the thinking blocks after them are bound to them.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from polythink import Client, Message, Response, Source, Tool
from polythink.simulator import Settings, Simulator
from polythink.simulator.clouds import (
    AWS_ACCESS_KEY_ID,
    AWS_SECRET_ACCESS_KEY,
    GOOGLE_TOKEN_PREFIX,
)
from polythink.simulator.prompt_cache import tokens_of
from tests.conftest import sdk_module
from tests.sdk_types import check_request

beta_params = sdk_module("anthropic.types.beta.message_create_params")

pytestmark = pytest.mark.anyio

SYSTEM = "Be careful. " + " ".join(
    f"Rule {n}: read the file before changing it." for n in range(120)
)
"""Long enough (over 1,024 tokens) for the prompt cache to keep it."""
QUESTION = "Fix it."
SHELL = Tool(
    name="shell",
    description="Run a command.",
    parameters={"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
)
ANTHROPIC_TOOLS = [
    {"name": "shell", "description": "Run a command.", "input_schema": dict(SHELL.parameters)}
]
CHAT_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "shell",
            "description": "Run a command.",
            "parameters": dict(SHELL.parameters),
        },
    }
]
CLEAR = "next_user_message"


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(Settings(tool_rounds=10, answer_words=3)) as simulator:
        yield simulator


def plan(turn: int) -> str:
    return f"Plan: step {turn}."


async def tool_loop(
    sim: Simulator, provider: str, model: str, turns: int = 3, **options: Any
) -> tuple[list[dict[str, Any]], list[dict[str, str]], list[Response]]:
    """Run ``turns`` turns of a tool loop; the bodies and headers sent, and the answers
    (``options``: the source's, a cloud's credentials and region)."""
    bodies: list[dict[str, Any]] = []
    headers: list[dict[str, str]] = []

    async def record(request: httpx.Request) -> None:
        bodies.append(json.loads(request.content))
        headers.append(dict(request.headers))

    if not options:
        options = {"api_key": "sim"}
    source = Source(provider, model, base_url=sim.base_url(provider), **options)
    messages = [Message(role="system", content=SYSTEM), Message(role="user", content=QUESTION)]
    answers = []
    http = httpx.AsyncClient(event_hooks={"request": [record]})
    async with http, Client([source], http_client=http, capabilities_store=False) as client:
        for turn in range(turns):
            answer = await client.complete(
                messages, tools=[SHELL], system_suffix=plan(turn), prompt_cache=True
            )
            assert answer.finish_reason == "tool_calls"
            answers.append(answer)
            messages.append(answer.message)
            for call in answer.tool_calls:
                messages.append(Message(role="tool", tool_call_id=call.id, content=f"out {turn}"))
    return bodies, headers, answers


def _blocks(answer: Response) -> list[dict[str, Any]]:
    return [dict(item) for item in answer.message.reasoning_items]


def _answered(answer: Response, turn: int) -> list[dict[str, Any]]:
    """An Anthropic answer's turn as sent back, and its tool result."""
    (call,) = answer.tool_calls
    result = {"type": "tool_result", "tool_use_id": call.id, "content": f"out {turn}"}
    return [
        {"role": "assistant", "content": _blocks(answer)},
        {"role": "user", "content": [result]},
    ]


def _kept(
    answers: list[Response], role: str = "system"
) -> Iterator[tuple[int, dict[str, Any], list[dict[str, Any]]]]:
    """Each turn of an Anthropic tool loop: its instruction, and the messages its request
    sends (the conversation as sent, every earlier instruction kept where it was)."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": QUESTION}]}
    ]
    for turn, answer in enumerate(answers):
        instruction: dict[str, Any] = {"role": role, "content": plan(turn)}
        if role == "system":
            instruction["clear_at"] = CLEAR
        yield turn, instruction, [*messages, instruction]
        messages += [instruction, *_answered(answer, turn)]


async def test_anthropic_keeps_each_turn_scoped_instruction_in_place(sim: Simulator) -> None:
    bodies, headers, answers = await tool_loop(sim, "anthropic", "claude-opus-5-5")
    for turn, instruction, messages in _kept(answers):
        body = bodies[turn]
        assert body == {
            "model": "claude-opus-5-5",
            "max_tokens": 4096,
            "system": SYSTEM,
            "messages": messages,
            "stream": False,
            "tools": ANTHROPIC_TOOLS,
            "cache_control": {"type": "ephemeral"},
        }
        assert headers[turn]["anthropic-beta"] == (
            "thinking-binding-controls-2026-08-01,mid-conversation-system-clear-at-2026-08-21"
        )
        assert answers[turn].message.instructions == instruction
    # The thinking the model made is in each answer, and went back verbatim.
    assert [b["type"] for b in _blocks(answers[0])] == ["thinking", "text", "tool_use"]
    # Each request is the whole previous one, and more (nothing sent before changed).
    for before, after in itertools.pairwise(bodies):
        assert after["messages"][: len(before["messages"])] == before["messages"]
    # The prompt cache served the whole previous request (its instruction, cleared since,
    # costs nothing now); the rest was written for the next call.
    usage = [a.usage for a in answers if a.usage is not None]
    assert usage[0].cache_read_tokens == 0
    for turn in (1, 2):
        cleared = tokens_of({"role": "system", "content": plan(turn - 1), "clear_at": CLEAR})
        read = (usage[turn - 1].input_tokens or 0) - cleared
        assert (usage[turn].cache_read_tokens, usage[turn].cache_write_tokens) == (
            read,
            (usage[turn].input_tokens or 0) - read,
        )


async def test_anthropic_without_mid_conversation_system_messages_keeps_user_turns(
    sim: Simulator,
) -> None:
    # claude-fable-5-2 is not in the models that take mid-conversation system messages
    # (CONTINUITY.md §7 C3): its instructions are a user message, kept in place the same way.
    bodies, headers, answers = await tool_loop(sim, "anthropic", "claude-fable-5-2")
    for turn, _, messages in _kept(answers, "user"):
        body = bodies[turn]
        assert body["system"] == SYSTEM
        assert body["messages"] == messages
        # Only the binding controls: no message carries clear_at.
        assert headers[turn]["anthropic-beta"] == "thinking-binding-controls-2026-08-01"


async def test_openai_chat_sends_only_the_newest_instruction_after_the_conversation(
    sim: Simulator,
) -> None:
    bodies, _, answers = await tool_loop(sim, "openai", "gpt-5.5")
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": QUESTION},
    ]
    for turn, body in enumerate(bodies):
        assert body == {
            "model": "gpt-5.5",
            "messages": [*messages, {"role": "system", "content": plan(turn)}],
            "stream": False,
            "tools": CHAT_TOOLS,
        }
        (call,) = answers[turn].tool_calls
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call.to_openai()]},
            {"role": "tool", "content": f"out {turn}", "tool_call_id": call.id},
        ]
    for before, after in itertools.pairwise(bodies):
        assert after["messages"][: len(before["messages"]) - 1] == before["messages"][:-1]


async def test_responses_keeps_instructions_and_items_and_ends_with_the_instruction(
    sim: Simulator,
) -> None:
    bodies, _, answers = await tool_loop(sim, "openai-responses", "gpt-5.5")
    items: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    for turn, body in enumerate(bodies):
        assert body == {
            "model": "gpt-5.5",
            "input": [*items, {"role": "system", "content": plan(turn)}],
            "instructions": SYSTEM,
            "stream": False,
            "include": ["reasoning.encrypted_content"],
            "tools": [
                {
                    "type": "function",
                    "name": "shell",
                    "description": "Run a command.",
                    "parameters": dict(SHELL.parameters),
                    "strict": False,
                }
            ],
        }
        (call,) = answers[turn].tool_calls
        # The output items verbatim, complete and in order (reasoning, then its call).
        output = _blocks(answers[turn])
        assert [item["type"] for item in output] == ["reasoning", "function_call"]
        items += [
            *output,
            {"type": "function_call_output", "call_id": call.id, "output": f"out {turn}"},
        ]


async def test_gemini_ends_the_last_user_turn_with_the_instruction(sim: Simulator) -> None:
    bodies, _, answers = await tool_loop(sim, "gemini", "gemini-3.8-flash")
    contents: list[dict[str, Any]] = []
    user: list[dict[str, Any]] = [{"text": QUESTION}]
    for turn, body in enumerate(bodies):
        assert body == {
            "contents": [*contents, {"role": "user", "parts": [*user, {"text": plan(turn)}]}],
            "systemInstruction": {"role": "user", "parts": [{"text": SYSTEM}]},
            "tools": [
                {
                    "functionDeclarations": [
                        {
                            "name": "shell",
                            "description": "Run a command.",
                            "parametersJsonSchema": dict(SHELL.parameters),
                        }
                    ]
                }
            ],
        }
        contents += [
            {"role": "user", "parts": user},
            {"role": "model", "parts": _blocks(answers[turn])},
        ]
        # Signed by the model, sent back as received.
        assert "thoughtSignature" in contents[-1]["parts"][0]
        user = [{"functionResponse": {"name": "shell", "response": {"result": f"out {turn}"}}}]


async def test_deepseek_instruction_follows_the_tool_results_as_a_user_turn(sim: Simulator) -> None:
    bodies, _, answers = await tool_loop(sim, "deepseek", "deepseek-v4-pro")
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    assert bodies[0]["messages"] == [
        *messages,
        {"role": "user", "content": f"{QUESTION}\n\n{plan(0)}"},
    ]
    messages.append({"role": "user", "content": QUESTION})
    for turn, body in enumerate(bodies):
        if turn:
            assert body["messages"] == [*messages, {"role": "user", "content": plan(turn)}]
        (call,) = answers[turn].tool_calls
        messages += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call.to_openai()],
                "reasoning_content": answers[turn].reasoning,
            },
            {"role": "tool", "content": f"out {turn}", "tool_call_id": call.id},
        ]


def _aws() -> dict[str, Any]:
    credentials = pytest.importorskip("botocore.credentials")
    keys = credentials.Credentials(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)
    return {"credentials": keys, "region": "us-east-1"}


async def test_claude_on_bedrock_keeps_its_instructions_in_place_with_betas_in_the_body(
    sim: Simulator,
) -> None:
    # The mid-conversation system message pages list Claude in Amazon Bedrock (CONTINUITY.md
    # §2.2): the same placement, with the betas in the InvokeModel body.
    model = "us.anthropic.claude-opus-5-5"
    bodies, headers, answers = await tool_loop(sim, "bedrock", model, **_aws())
    for turn, instruction, messages in _kept(answers):
        body = bodies[turn]
        assert body == {
            "anthropic_version": "bedrock-2023-05-31",
            "max_tokens": 4096,
            "system": SYSTEM,
            "messages": messages,
            "tools": ANTHROPIC_TOOLS,
            "cache_control": {"type": "ephemeral"},
            "anthropic_beta": [
                "thinking-binding-controls-2026-08-01",
                "mid-conversation-system-clear-at-2026-08-21",
            ],
        }
        assert "anthropic-beta" not in headers[turn]
        assert answers[turn].message.instructions == instruction
    assert [b["type"] for b in _blocks(answers[0])] == ["thinking", "text", "tool_use"]
    usage = [a.usage for a in answers if a.usage is not None]
    assert [u.cache_read_tokens > 0 for u in usage] == [False, True, True]


async def test_claude_on_vertex_keeps_its_instructions_in_place(sim: Simulator) -> None:
    options = {"credentials": lambda: GOOGLE_TOKEN_PREFIX + "t", "project": "p1"}
    options["region"] = "us-east5"
    bodies, headers, answers = await tool_loop(sim, "vertex", "claude-opus-5-5", **options)
    for turn, instruction, messages in _kept(answers):
        body = bodies[turn]
        assert body["messages"] == messages
        assert body["system"] == SYSTEM
        assert answers[turn].message.instructions == instruction
        assert headers[turn]["anthropic-beta"] == (
            "thinking-binding-controls-2026-08-01,mid-conversation-system-clear-at-2026-08-21"
        )


async def test_converse_ends_the_last_user_turn_with_the_instruction(sim: Simulator) -> None:
    # Converse has no system message after the conversation: the suffix ends the last user
    # turn, after its cache point, and the next call sends the turn without it.
    model = "openai.gpt-oss-120b-1:0"
    bodies, _, answers = await tool_loop(sim, "bedrock-converse", model, **_aws())
    point = {"cachePoint": {"type": "default"}}
    turns: list[dict[str, Any]] = [{"role": "user", "content": [{"text": QUESTION}]}]
    for turn, body in enumerate(bodies):
        last = turns[-1]
        ended = {**last, "content": [*last["content"], point, {"text": plan(turn)}]}
        assert body["messages"] == [*turns[:-1], ended]
        assert body["system"] == [{"text": SYSTEM}, point]
        (call,) = answers[turn].tool_calls
        turns += [
            {"role": "assistant", "content": _blocks(answers[turn])},
            {
                "role": "user",
                "content": [
                    {
                        "toolResult": {
                            "toolUseId": call.id,
                            "content": [{"text": f"out {turn}"}],
                        }
                    }
                ],
            },
        ]


@pytest.mark.parametrize("model", ["claude-opus-5-5", "claude-fable-5-2"])
async def test_anthropic_bodies_fit_the_sdks_beta_types(sim: Simulator, model: str) -> None:
    # The official SDK's beta Messages params (anthropic 2.17.0): mid-conversation system
    # messages with clear_at (BetaSystemMessageParam), thinking.block_binding.
    bodies, _, _ = await tool_loop(sim, "anthropic", model)
    for body in bodies:
        assert check_request(beta_params.MessageCreateParamsNonStreaming, body) == []
