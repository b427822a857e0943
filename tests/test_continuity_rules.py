"""The other wires' continuity rules, the data behind model switches, and their options.

- DeepSeek takes ``reasoning_content`` back on every assistant turn of a tool exchange, Kimi
  on every tool-call turn; the simulator answers a missing one with their 400s.
- The Responses API takes a reasoning item with its ``summary`` and the item that followed
  it; ``store: false`` leaves out the items it cannot look up, and says so.
- A Gemini turn another Gemini model made goes without its thought signatures (they
  validate only where they were made), its function calls with the documented placeholder.
- A turn's opaque reasoning items are not read by another wire: the response says so.
- ``reasoning_affinity`` sends a conversation back to the source that made its reasoning.
- The simulated prompt cache counts the longest unchanged prefix at each provider's
  granularity; ``input_transformations`` are read from a stream's ``message_start`` and
  replaced by a ``message_delta`` copy; ``prefix_mismatch`` is set per call, on the source,
  the client, or in a file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from polythink import Client, Message, MessageMetadata, Source, Tool, ToolCall
from polythink.config import sources_from_env, sources_from_toml
from polythink.conversion import coerce_messages
from polythink.middleware.failover import reasoning_source
from polythink.providers import get_provider
from polythink.reasoning.continuity import thinking_reading
from polythink.simulator import Settings, Simulator
from polythink.simulator.prompt_cache import PrefixCache, unit
from polythink.transports.anthropic import AnthropicStreamAssembler
from polythink.transports.carry import LeftOut
from polythink.transports.gemini import SKIP_SIGNATURE_VALIDATION
from polythink.transports.openai_responses import build_body
from polythink.types import Request

pytestmark = pytest.mark.anyio

SHELL = Tool(
    name="shell",
    description="Run a command.",
    parameters={"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
)
CALL = ToolCall(id="call_1", name="shell", arguments='{"cmd":"ls"}')


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(Settings(tool_rounds=10, answer_words=3)) as simulator:
        yield simulator


def source(sim: Simulator, provider: str, model: str, **fields: Any) -> Source:
    return Source(provider, model, api_key="sim", base_url=sim.base_url(provider), **fields)


# ---------------------------------------------------------------- OpenAI-compatible wires


async def test_deepseek_gets_reasoning_back_on_the_answer_after_the_tool_results(
    sim: Simulator,
) -> None:
    made = {"reasoning_format": "deepseek"}
    history = [
        Message(role="user", content="List the files."),
        Message(role="assistant", tool_calls=(CALL,), reasoning="look", **made),
        Message(role="tool", tool_call_id="call_1", content="README.md"),
        Message(role="assistant", content="One file.", reasoning="count", **made),
        Message(role="user", content="Thanks; and now?"),
    ]
    async with Client([source(sim, "deepseek", "deepseek-v4-pro")]) as client:
        answer = await client.complete(history, reasoning_effort="high", tools=[SHELL])
    assert answer.finish_reason == "tool_calls"
    # Sent as before this rule (on the tool-call turn only), the simulator refuses it.
    raw = {
        "model": "deepseek-v4-pro",
        "thinking": {"type": "enabled"},
        "messages": [
            {"role": "user", "content": "List the files."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [CALL.to_openai()],
                "reasoning_content": "look",
            },
            {"role": "tool", "content": "README.md", "tool_call_id": "call_1"},
            {"role": "assistant", "content": "One file."},
            {"role": "user", "content": "Thanks; and now?"},
        ],
    }
    async with httpx.AsyncClient() as http:
        refused = await http.post(f"{sim.base_url('deepseek')}/chat/completions", json=raw)
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == (
        "Missing reasoning_content field in the assistant message at message index 3. The "
        "reasoning_content in the thinking mode must be passed back to the API."
    )


async def test_kimi_gets_an_empty_reasoning_on_a_tool_call_turn_it_did_not_make(
    sim: Simulator,
) -> None:
    history = [
        Message(role="user", content="List the files."),
        Message(role="assistant", tool_calls=(CALL,)),
        Message(role="tool", tool_call_id="call_1", content="README.md"),
    ]
    async with Client([source(sim, "kimi", "kimi-k3")]) as client:
        answer = await client.complete(history, reasoning_effort="high", tools=[SHELL])
    assert answer.finish_reason in ("tool_calls", "stop")
    raw = {
        "model": "kimi-k3",
        "messages": [
            {"role": "user", "content": "List the files."},
            {"role": "assistant", "content": None, "tool_calls": [CALL.to_openai()]},
            {"role": "tool", "content": "README.md", "tool_call_id": "call_1"},
        ],
    }
    async with httpx.AsyncClient() as http:
        refused = await http.post(f"{sim.base_url('kimi')}/chat/completions", json=raw)
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == (
        "thinking is enabled but reasoning_content is missing in assistant tool call message "
        "at index 1"
    )


# ---------------------------------------------------------------- Responses


def test_responses_reasoning_items_need_their_summary_and_the_item_after_them(
    sim: Simulator,
) -> None:
    url = f"{sim.base_url('openai-responses')}/responses"
    item = {"id": "rs_1", "type": "reasoning", "summary": []}
    call = {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"}
    question = {"role": "user", "content": "hi"}
    alone = httpx.post(url, json={"model": "gpt-5.5", "input": [question, item]})
    assert alone.status_code == 400
    assert alone.json()["error"]["message"] == (
        "Item 'rs_1' of type 'reasoning' was provided without its required following item."
    )
    bare = {"id": "rs_1", "type": "reasoning"}
    unsummarised = httpx.post(url, json={"model": "gpt-5.5", "input": [question, bare, call]})
    assert (
        unsummarised.json()["error"]["message"] == "Missing required parameter: 'input[1].summary'."
    )


async def test_store_false_says_which_reasoning_items_it_leaves_out() -> None:
    stored = {"id": "rs_9", "type": "reasoning", "summary": []}
    history = [
        Message(role="user", content="hi"),
        Message(
            role="assistant",
            content="ok",
            reasoning_items=(
                stored,
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "ok"}],
                },
            ),
            reasoning_format="openai-responses",
        ),
        Message(role="user", content="again"),
    ]

    left_out = LeftOut("openai-responses")
    body = build_body(
        Request(messages=coerce_messages(history), extra_body={"store": False}),
        model="gpt-5.5",
        profile=get_provider("openai-responses"),
        left_out=left_out,
    )
    assert [item.get("type") for item in body["input"]] == [None, "message", None]
    assert left_out.notes() == [
        "not sent to openai-responses: the reasoning items without encrypted_content of "
        "message 1 (store is false, so the server keeps no item to look them up by (404 'Items "
        "are not persisted when `store` is set to false', vercel/ai#7543): that reasoning is "
        "lost)"
    ]


# ---------------------------------------------------------------- Gemini across models


async def test_a_gemini_turn_of_another_model_goes_without_its_signatures(sim: Simulator) -> None:
    bodies: list[Any] = []

    async def record(request: httpx.Request) -> None:
        bodies.append(json.loads(request.content))

    messages: list[Any] = [Message(role="user", content="List the files.")]
    http = httpx.AsyncClient(event_hooks={"request": [record]})
    async with http:
        async with Client([source(sim, "gemini", "gemini-3.1-pro-preview")], http_client=http) as c:
            made = await c.complete(messages, tools=[SHELL])
        messages += [
            made.message,
            Message(role="tool", tool_call_id=made.tool_calls[0].id, content="a"),
        ]
        async with Client([source(sim, "gemini", "gemini-3.8-flash")], http_client=http) as c:
            switched = await c.complete(messages, tools=[SHELL])
    signed = [dict(part) for part in made.message.reasoning_items]
    assert "thoughtSignature" in signed[0]
    model_turn = bodies[1]["contents"][1]
    assert model_turn == {
        "role": "model",
        "parts": [
            {
                **{k: v for k, v in signed[0].items() if k != "thoughtSignature"},
                "thoughtSignature": SKIP_SIGNATURE_VALIDATION,
            }
        ],
    }
    assert (
        "not sent to gemini: the thoughts and thought signatures of message 1 (made by "
        "'gemini-3.1-pro-preview', whose thought signatures 'gemini-3.8-flash' does not "
        "validate (a signature validates only where it was made, CONTINUITY.md §3.2): sent "
        "without them, function calls with the documented placeholder; that reasoning is lost)"
    ) in switched.warnings


# ---------------------------------------------------------------- across wires


async def test_another_wires_reasoning_items_are_named_as_lost(sim: Simulator) -> None:
    messages: list[Any] = [Message(role="user", content="List the files.")]
    async with Client([source(sim, "anthropic", "claude-opus-5-5")]) as client:
        made = await client.complete(messages)
    messages += [made.message, Message(role="user", content="And then?")]
    async with Client([source(sim, "openai", "gpt-5.5")]) as client:
        answer = await client.complete(messages)
    assert (
        "not sent to openai: the reasoning items of message 1 (they are another wire's signed "
        "or encrypted reasoning, which verifies only where it was made: that reasoning is lost "
        "on this wire, and kept in the history for the next call that goes back there)"
    ) in answer.warnings


# ---------------------------------------------------------------- reasoning affinity


def test_the_source_of_the_last_reasoning_is_found_from_the_end() -> None:
    models = [("anthropic", "claude-fable-5-2"), ("anthropic", "claude-opus-5-5")]
    made = MessageMetadata(provider="anthropic", model="claude-opus-5-5-20260922", source_index=1)
    turn = Message(role="assistant", content="ok", reasoning="r", metadata=made)
    question = Message(role="user", content="q")
    assert reasoning_source((question, turn, question), models) == 1
    plain = Message(role="assistant", content="ok", metadata=made)
    assert reasoning_source((question, turn, question, plain, question), models) is None
    other = MessageMetadata(provider="anthropic", model="claude-haiku-5-5", source_index=1)
    moved = Message(role="assistant", content="ok", reasoning="r", metadata=other)
    assert reasoning_source((question, moved, question), models) is None


async def test_reasoning_affinity_goes_back_to_the_source_that_made_the_reasoning(
    sim: Simulator,
) -> None:
    # claude-3-7-sonnet is retired: its 404 sends the first call to the second source.
    retired = source(sim, "anthropic", "claude-3-7-sonnet")
    opus = source(sim, "anthropic", "claude-opus-5-5")
    fable = source(sim, "anthropic", "claude-fable-5-2")
    messages: list[Any] = [Message(role="user", content="Plan it.")]
    async with Client([retired, opus]) as client:
        made = await client.complete(messages)
    assert made.source_index == 1
    messages += [made.message, Message(role="user", content="Go on.")]
    async with Client([fable, opus], reasoning_affinity=True) as client:
        kept = await client.complete(messages)
    async with Client([fable, opus]) as client:
        ordered = await client.complete(messages)
    assert (kept.source_index, kept.model) == (1, "claude-opus-5-5")
    assert (ordered.source_index, ordered.model) == (0, "claude-fable-5-2")
    assert not any("reasoning lost" in w for w in kept.warnings)
    assert any("reasoning lost on anthropic 'claude-fable-5-2'" in w for w in ordered.warnings)


def test_the_readers_of_each_model_are_data_with_sources() -> None:
    fable = thinking_reading("claude-fable-5-2", "claude-opus-5-5")
    assert fable is not None
    assert (fable.reads, fable.source.split(":")[0]) == (False, "F52")
    earlier = thinking_reading("claude-opus-5", "claude-opus-5.5")
    assert earlier is not None
    assert earlier.reads is True
    # Readable on the Claude API only.
    api = thinking_reading("claude-opus-5-5", "claude-fable-5-1", provider="anthropic")
    cloud = thinking_reading("claude-opus-5-5", "claude-fable-5-1", provider="bedrock")
    assert (api and api.reads, cloud and cloud.reads) == (True, False)
    # OpenAI documents no binding between models: nothing is said.
    assert thinking_reading("gpt-6", "gpt-5.6") is None


# ---------------------------------------------------------------- the simulated prompt cache


def test_the_prompt_cache_reads_the_longest_unchanged_prefix_per_provider() -> None:
    cache = PrefixCache()
    head = unit({"system": "s"}, 1000)
    turns = [unit({"m": n}, 100) for n in range(4)]
    first = cache.serve("openai:m", [head, *turns[:2]], increment=128)
    assert (first.read, first.total) == (0, head.tokens + turns[0].tokens + turns[1].tokens)
    again = cache.serve("openai:m", [head, *turns], increment=128)
    # 1,200 tokens in common, reported in steps of 128 above 1,024: 1,152.
    assert again.read == 1152
    # An edited start misses everything.
    edited = cache.serve("openai:m", [unit({"system": "t"}, 1000), *turns], increment=128)
    assert edited.read == 0
    # Anthropic writes only at its breakpoints, and reads back at most 20 units before one.
    anthropic = PrefixCache()
    units = [head, *turns]
    assert anthropic.serve("anthropic:m", units, writes=[], lookback=20).written == 0
    wrote = anthropic.serve("anthropic:m", units, writes=[3], lookback=20)
    assert (wrote.read, wrote.written) == (0, 1200)
    grown = [*units, *(unit({"m": f"x{n}"}, 10) for n in range(25))]
    near = anthropic.serve("anthropic:m", grown[:20], writes=[20], lookback=20)
    assert (near.read, near.written) == (1200, 2 * 100 + 15 * 10)
    far = anthropic.serve("anthropic:m", grown, writes=[len(grown)], lookback=20)
    assert far.read == near.total  # the prefix written at 20 is within 20 units of 30


def test_input_transformations_from_message_start_and_a_later_delta() -> None:
    assembler = AnthropicStreamAssembler(get_provider("anthropic"), 0, "claude-opus-5-5")
    start = [
        {
            "type": "thinking_dropped",
            "path": "messages.1.content.0",
            "reason": "prefix_binding_mismatch",
        }
    ]
    later = [
        {
            "type": "thinking_dropped",
            "path": "messages.1.content.0",
            "reason": "model_binding_mismatch",
        }
    ]
    events = [
        {
            "type": "message_start",
            "message": {
                "id": "m",
                "model": "claude-opus-5-5",
                "usage": {},
                "input_transformations": start,
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
        {"type": "content_block_stop", "index": 0},
    ]
    for event in events:
        assembler.feed(event)
    assert assembler.response().input_transformations == start
    assembler.feed(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 1},
            "input_transformations": later,
        }
    )
    response = assembler.response()
    assert response.input_transformations == later
    assert response.warnings == [
        "reasoning dropped by anthropic: the block at messages.1.content.0 was removed before "
        "the model read it (model_binding_mismatch: it was made by a model this one cannot "
        "read); it is not billed, and that reasoning is lost for this call"
    ]


# ---------------------------------------------------------------- options


def test_prefix_mismatch_is_checked_and_given_by_file_environment_and_client(
    tmp_path: Path,
) -> None:
    with pytest.raises(
        ValueError, match=r"Source\.prefix_mismatch must be one of 'error', 'drop_block'"
    ):
        Source("anthropic", "claude-opus-5-5", api_key="k", prefix_mismatch="drop")
    path = tmp_path / "polythink.toml"
    path.write_text(
        '[thinking]\nprefix_mismatch = "drop_block"\n\n'
        '[[source]]\nprovider = "anthropic"\nmodel = "claude-opus-5-5"\n\n'
        '[[source]]\nprovider = "anthropic"\nmodel = "claude-fable-5-2"\n'
        'prefix_mismatch = "error"\n'
    )
    assert [s.prefix_mismatch for s in sources_from_toml(path)] == ["drop_block", "error"]
    environ = {
        "CHAT__ANTHROPIC__0__MODEL": "claude-opus-5-5",
        "CHAT__THINKING__PREFIX_MISMATCH": "error",
    }
    assert [s.prefix_mismatch for s in sources_from_env("CHAT", environ)] == ["error"]
    given = Source("anthropic", "claude-fable-5-2", api_key="k", prefix_mismatch="error")
    client = Client(
        [Source("anthropic", "claude-opus-5-5", api_key="k"), given], prefix_mismatch="drop_block"
    )
    assert [s.prefix_mismatch for s in client.sources] == ["drop_block", "error"]
    with pytest.raises(ValueError, match="prefix_mismatch must be one of"):
        client.request([{"role": "user", "content": "hi"}], prefix_mismatch="always")


async def test_glm_preserved_thinking_is_clear_thinking_false_with_reasoning_on_every_turn() -> (
    None
):
    made = {"reasoning_format": "glm"}
    history = [
        Message(role="user", content="List the files."),
        Message(role="assistant", tool_calls=(CALL,), reasoning="look", **made),
        Message(role="tool", tool_call_id="call_1", content="README.md"),
        Message(role="assistant", content="One file.", reasoning="count", **made),
        Message(role="user", content="And now?"),
    ]
    answer = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]}
    glm = Source("glm", "glm-5.2", api_key="sk-glm-0123456789")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(f"{glm.endpoint}/chat/completions").respond(200, json=answer)
        async with Client([glm]) as client:
            await client.complete(
                history,
                reasoning_effort="high",
                extra_body={"thinking": {"clear_thinking": False}},
            )
    body = json.loads(route.calls[0].request.content)
    # The caller's clear_thinking joins polythink's thinking object (ZAI: preserved thinking).
    assert body["thinking"] == {"type": "enabled", "clear_thinking": False}
    # The complete reasoning, unmodified and in order, on every assistant turn.
    assert [m.get("reasoning_content") for m in body["messages"]] == [
        None,
        "look",
        None,
        "count",
        None,
    ]
