"""Preserved thinking on Anthropic: a tool loop that keeps its thinking, and what happens when
a conversation does not.

Against the simulator, which plays Anthropic's prefix and model checks with the API's own 400
wording (polythink.simulator.binding), on an account created after 2026-08-31:

- the Done-when loop: a tool loop with a changing ``system_suffix`` and ``prompt_cache`` on
  claude-opus-5-5 and claude-fable-5-2, through ``compact()``, with no 400;
- the same loop with the suffix edited into the system prompt (what polythink did before)
  fails on its second call with :class:`ThinkingBindingError`, which names the block and
  what changed; with ``prefix_mismatch="drop_block"`` it is sent again once with the API
  told to drop such blocks, the answer says what was dropped (``input_transformations``, a
  warning, a telemetry counter), and the conversation keeps sending ``drop_block``, after a
  save and load too;
- a model switch that loses reasoning says so, and the history is sent unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from polythink import Client, Message, Response, Source, Tool, compact
from polythink.conversation import load_conversation, save_conversation, strip_reasoning
from polythink.errors import RequestRejectedError, ThinkingBindingError
from polythink.simulator import Settings, Simulator
from polythink.transports import anthropic
from polythink.transports.instructions import InstructionPlan
from tests.conftest import sdk_module
from tests.sdk_types import check_response

pytestmark = pytest.mark.anyio

SYSTEM = "Be careful. " + " ".join(
    f"Rule {n}: read the file before changing it." for n in range(120)
)
SHELL = Tool(
    name="shell",
    description="Run a command.",
    parameters={"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
)
BOUND = (
    "messages.1.content.0: Invalid `signature` in `thinking` block. The block is bound to a "
    "different conversation. Remove the block, or set `thinking.block_binding.prefix_mismatch_"
    'behavior` to "drop_block". The `system` prompt differs from the one the block was made with.'
)
"""The simulator's 400, in the API's words (CONTINUITY.md §1.4) and a last sentence of its own;
polythink sends the binding beta to claude-opus-5-5, so no sentence asks for it."""


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(Settings(tool_rounds=100, answer_words=3)) as simulator:
        yield simulator


@pytest.fixture(autouse=True)
def cold_cache(sim: Simulator) -> None:
    """Each test starts with the simulated prompt cache empty."""
    sim.server.prompt_cache.clear()


class Recorder:
    """The JSON bodies and headers a client sends, through an httpx event hook."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[httpx.Headers] = []

    async def __call__(self, request: httpx.Request) -> None:
        self.bodies.append(json.loads(request.content))
        self.headers.append(request.headers)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(event_hooks={"request": [self]})


def source(sim: Simulator, model: str, **fields: Any) -> Source:
    return Source("anthropic", model, api_key="sim", base_url=sim.base_url("anthropic"), **fields)


async def turn(client: Client, messages: list[Message], step: int, **call: Any) -> Response:
    """One turn of the tool loop: the answer and its tool results appended."""
    answer = await client.complete(
        messages, tools=[SHELL], system_suffix=f"Plan: step {step}.", prompt_cache=True, **call
    )
    messages.append(answer.message)
    for tool_call in answer.tool_calls:
        messages.append(Message(role="tool", tool_call_id=tool_call.id, content=f"out {step}"))
    return answer


def start() -> list[Message]:
    return [Message(role="system", content=SYSTEM), Message(role="user", content="Fix it.")]


@pytest.mark.parametrize("model", ["claude-opus-5-5", "claude-fable-5-2"])
@pytest.mark.parametrize("keep", [0, 1])
async def test_a_tool_loop_keeps_its_thinking_through_compaction(
    sim: Simulator, model: str, keep: int
) -> None:
    messages = start()
    async with Client([source(sim, model)], capabilities_store=False) as client:
        answers = [await turn(client, messages, step) for step in range(4)]
        compacted = await compact(client, messages, tools=[SHELL], keep=keep)
        messages = list(compacted.messages)
        messages.append(Message(role="user", content="Go on."))
        answers += [await turn(client, messages, step) for step in range(4, 7)]
    assert [a.finish_reason for a in answers] == ["tool_calls"] * 7
    assert all(a.input_transformations == [] for a in answers)
    # Every turn after the first read the one before from the cache, before and after the
    # compaction: nothing sent was edited.
    reads = [a.usage.cache_read_tokens for a in answers if a.usage is not None]
    assert reads[0] == 0
    assert reads[4] == 0
    assert all(read > 1024 for read in reads[1:4] + reads[5:])
    # The compaction names the turns whose reasoning it gave up: all four, the kept one too.
    assert compacted.reasoning_dropped == (2, 4, 6, 8)
    assert compacted.kept == (2 if keep else 0)
    if keep:
        # The kept turn is the last call with its result (never one without the other),
        # without its thinking, and still after the instructions it followed.
        assert [m.role for m in compacted.messages] == ["system", "user", "assistant", "tool"]
        kept = compacted.messages[2]
        assert kept.reasoning_items == ()
        assert kept.instructions is not None


@pytest.fixture
def edited(monkeypatch: pytest.MonkeyPatch) -> None:
    """What polythink did before: the suffix as a second system block, edited every call."""
    monkeypatch.setattr(anthropic, "instruction_plan", lambda *_: InstructionPlan("system"))


@pytest.mark.usefixtures("edited")
async def test_editing_the_system_prompt_every_call_is_refused_with_what_changed(
    sim: Simulator,
) -> None:
    messages = start()
    async with Client([source(sim, "claude-opus-5-5")], capabilities_store=False) as client:
        await turn(client, messages, 0)
        with pytest.raises(ThinkingBindingError) as caught:
            await turn(client, messages, 1)
    error = caught.value
    assert isinstance(error, RequestRejectedError)
    assert (error.status_code, error.path, error.beta_missing) == (
        400,
        "messages.1.content.0",
        False,
    )
    assert error.changed == "The `system` prompt differs from the one the block was made with."
    assert "prefix_mismatch='drop_block'" in str(error)
    assert "strip_reasoning(messages)" in str(error)
    assert json.loads(error.body or "{}")["error"]["message"] == BOUND


@pytest.mark.usefixtures("edited")
async def test_drop_block_is_sent_once_the_api_refuses_and_the_conversation_keeps_it(
    sim: Simulator, tmp_path: Path
) -> None:
    reader = InMemoryMetricReader()
    recorder = Recorder()
    messages = start()
    http = recorder.client()
    async with (
        http,
        Client(
            [source(sim, "claude-opus-5-5", prefix_mismatch="drop_block")],
            http_client=http,
            capabilities_store=False,
            meter_provider=MeterProvider(metric_readers=[reader]),
        ) as client,
    ):
        first = await turn(client, messages, 0)
        dropped = await turn(client, messages, 1)
        path = tmp_path / "conversation.jsonl"
        save_conversation(path, messages)
        messages = load_conversation(path)
        later = await turn(client, messages, 2)
    # The first call went as the API's default; the second was refused once (400), then sent
    # again with drop_block; the third, of the same conversation, sent drop_block at once.
    bindings = [body.get("thinking", {}).get("block_binding") for body in recorder.bodies]
    assert bindings == [
        None,
        None,
        {"prefix_mismatch_behavior": "drop_block"},
        {"prefix_mismatch_behavior": "drop_block"},
    ]
    assert recorder.bodies[2]["thinking"]["type"] == "adaptive"
    assert first.message.metadata is not None
    assert first.message.metadata.prefix_mismatch is None
    for answer in (dropped, later):
        assert answer.message.metadata is not None
        assert answer.message.metadata.prefix_mismatch == "drop_block"
    assert dropped.input_transformations == [
        {
            "type": "thinking_dropped",
            "path": "messages.1.content.0",
            "reason": "prefix_binding_mismatch",
        }
    ]
    assert (
        "reasoning dropped by anthropic: the block at messages.1.content.0 was removed before "
        "the model read it (prefix_binding_mismatch: what came before it changed since it was "
        "made); it is not billed, and that reasoning is lost for this call"
    ) in dropped.warnings
    assert any("sent again with thinking.block_binding" in w for w in dropped.warnings)
    # Both earlier blocks are bound to system prompts that changed since.
    assert [t["path"] for t in later.input_transformations] == [
        "messages.1.content.0",
        "messages.3.content.0",
    ]
    points = {
        (
            point.attributes["polythink.reasoning.transformation"],
            point.attributes["polythink.reasoning.reason"],
        ): point.value
        for metric in reader.get_metrics_data().resource_metrics[0].scope_metrics[0].metrics
        if metric.name == "polythink.reasoning.blocks"
        for point in metric.data.data_points
    }
    assert points == {("thinking_dropped", "prefix_binding_mismatch"): 3}


@pytest.mark.usefixtures("edited")
async def test_strip_reasoning_is_the_recovery_without_the_beta(sim: Simulator) -> None:
    messages = start()
    async with Client([source(sim, "claude-opus-5-5")], capabilities_store=False) as client:
        await turn(client, messages, 0)
        with pytest.raises(ThinkingBindingError):
            await client.complete(messages, tools=[SHELL], system_suffix="Plan: step 1.")
        recovered = await turn(client, strip_reasoning(messages), 1)
    assert recovered.finish_reason == "tool_calls"
    assert [m.reasoning_items for m in strip_reasoning(messages) if m.role == "assistant"] == [()]


async def test_a_model_switch_that_loses_reasoning_says_so_and_edits_nothing(
    sim: Simulator,
) -> None:
    recorder = Recorder()
    messages = start()
    http = recorder.client()
    async with http:
        async with Client([source(sim, "claude-fable-5-2")], http_client=http) as client:
            made = await turn(client, messages, 0)
        async with Client([source(sim, "claude-opus-5-5")], http_client=http) as client:
            switched = await turn(client, messages, 1)
    # The history went as it was: the Fable 5.2 turn with its thinking block verbatim, and the
    # instructions it followed (a user message, as Fable 5.2 takes them) in place.
    sent = recorder.bodies[1]["messages"]
    assert sent[1] == {"role": "user", "content": "Plan: step 0."}
    assert sent[2] == {
        "role": "assistant",
        "content": [dict(b) for b in made.message.reasoning_items],
    }
    assert sent[-1] == {
        "role": "system",
        "content": "Plan: step 1.",
        "clear_at": "next_user_message",
    }
    assert (
        "reasoning lost on anthropic 'claude-opus-5-5': the thinking blocks of messages 2 were "
        "made by 'claude-fable-5-2', and 'claude-opus-5-5' cannot read them: the API drops them "
        "before the model reads them, so that reasoning is lost for this call; they are sent "
        "unchanged and stay readable for a model that can (F52: Fable 5.2 blocks are dropped by "
        "any model other than Fable 5.2 / Mythos 5.2, Fable 5.1 included)"
    ) in switched.warnings
    # The API agrees, under the beta.
    assert switched.input_transformations == [
        {
            "type": "thinking_dropped",
            "path": "messages.2.content.0",
            "reason": "model_binding_mismatch",
        }
    ]


@pytest.mark.usefixtures("edited")
async def test_error_opts_in_to_the_check_and_an_older_account_lets_blocks_through(
    sim: Simulator,
) -> None:
    sim.settings.new_account = False
    try:
        messages = start()
        async with Client([source(sim, "claude-opus-5-5")], capabilities_store=False) as client:
            await turn(client, messages, 0)
            allowed = await turn(client, messages, 1)
            with pytest.raises(ThinkingBindingError):
                await turn(client, messages, 2, prefix_mismatch="error")
    finally:
        sim.settings.new_account = True
    assert allowed.input_transformations == [
        {
            "type": "thinking_mismatch_allowed",
            "path": "messages.1.content.0",
            "reason": "prefix_binding_mismatch",
        }
    ]
    assert any(w.startswith("reasoning unchecked by anthropic") for w in allowed.warnings)


def test_merge_betas_keeps_every_value_once_in_order() -> None:
    assert anthropic.merge_betas(None, None, []) is None
    # The first value as written; then each value of the others it lacks.
    assert (
        anthropic.merge_betas(
            "fast-mode-2026-02-01, thinking-binding-controls-2026-08-01",
            "my-beta-2027-01-01",
            ["thinking-binding-controls-2026-08-01", "mid-conversation-system-clear-at-2026-08-21"],
        )
        == "fast-mode-2026-02-01, thinking-binding-controls-2026-08-01,my-beta-2027-01-01,"
        "mid-conversation-system-clear-at-2026-08-21"
    )
    assert anthropic.merge_betas(None, "a,b", ["b", "c"]) == "a,b,c"


async def test_callers_betas_and_block_binding_pass_through(sim: Simulator) -> None:
    recorder = Recorder()
    binding = {"prefix_mismatch_behavior": "error", "bind_to_end_user": False}
    http = recorder.client()
    async with (
        http,
        Client(
            [source(sim, "claude-opus-4-7", headers={"anthropic-beta": "fast-mode-2026-02-01"})],
            http_client=http,
        ) as client,
    ):
        await client.complete(
            [{"role": "user", "content": "hi"}],
            reasoning_effort="low",
            extra_body={"thinking": {"block_binding": binding}},
        )
    (body,) = recorder.bodies
    assert body["thinking"] == {
        "type": "adaptive",
        "block_binding": binding,
        "display": "summarized",
    }
    assert recorder.headers[0]["anthropic-beta"] == (
        "fast-mode-2026-02-01,thinking-binding-controls-2026-08-01"
    )


@pytest.mark.parametrize("stream", [False, True])
async def test_the_simulated_answers_fit_the_sdks_beta_types(sim: Simulator, stream: bool) -> None:
    beta = sdk_module("anthropic.types.beta")
    url = f"{sim.base_url('anthropic')}/messages"
    headers = {
        "anthropic-version": "2026-10-21",
        "anthropic-beta": "thinking-binding-controls-2026-08-01",
    }
    question = {"role": "user", "content": "Fix it."}
    async with httpx.AsyncClient() as http:
        first = await http.post(
            url,
            headers=headers,
            json={
                "model": "claude-opus-5-5",
                "max_tokens": 512,
                "system": "A",
                "messages": [question],
            },
        )
        replay = {
            "model": "claude-opus-5-5",
            "max_tokens": 512,
            "system": "B",
            "stream": stream,
            "thinking": {
                "type": "adaptive",
                "block_binding": {"prefix_mismatch_behavior": "drop_block"},
            },
            "messages": [
                question,
                {"role": "assistant", "content": first.json()["content"]},
                {"role": "user", "content": "Go on."},
            ],
        }
        answer = await http.post(url, headers=headers, json=replay)
    dropped = [
        {
            "type": "thinking_dropped",
            "path": "messages.1.content.0",
            "reason": "prefix_binding_mismatch",
        }
    ]
    if not stream:
        assert check_response(beta.BetaMessage, answer.json()) == []
        assert answer.json()["input_transformations"] == dropped
        return
    events = [
        json.loads(line[len("data:") :])
        for line in answer.text.splitlines()
        if line.startswith("data:") and '"ping"' not in line
    ]
    assert [check_response(beta.BetaRawMessageStreamEvent, e) for e in events] == [[]] * len(events)
    assert events[0]["message"]["input_transformations"] == dropped
