"""A stream that breaks after its first token: the partial is marked, never passed off as an answer.

``StreamInterruptedError.partial`` has ``interrupted=True`` and its ``message`` carries
``metadata.interrupted``, so a conversation that appended it can tell; ``resume_interrupted``
turns such a conversation into one that asks the model to continue. Checked on every wire
against the simulator (a connection reset mid-stream) and on recorded streams cut in half.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import respx

from polythink import Client, Message, MessageMetadata, Source, StreamEvent
from polythink.conversation import CONTINUE_PROMPT, resume_interrupted
from polythink.errors import StreamInterruptedError
from polythink.simulator import Settings, Simulator
from polythink.simulator.faults import Fault, FaultPlan
from tests.cassettes import RECORDED_STREAMS
from tests.conftest import cassette

pytestmark = pytest.mark.anyio

QUESTION = {"role": "user", "content": "Tell me about rivers."}
WIRES = [
    ("openai", "gpt-4o"),
    ("openai-responses", "gpt-4o"),
    ("anthropic", "claude-haiku-4-5"),
    ("gemini", "gemini-3.8-flash"),
]


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(Settings(answer_words=12)) as simulator:
        yield simulator


@pytest.fixture
def plan(sim: Simulator) -> Iterator[FaultPlan]:
    sim.settings.faults = FaultPlan()
    yield sim.settings.faults
    sim.settings.faults = None


async def _consume(client: Client, messages: list[Any], seen: list[StreamEvent]) -> None:
    async for event in client.stream(messages):
        seen.append(event)


@pytest.mark.parametrize(("provider", "model"), WIRES)
async def test_simulated_cut_stream_gives_an_interrupted_partial_and_resumes(
    sim: Simulator, plan: FaultPlan, provider: str, model: str
) -> None:
    source = Source(provider, model, base_url=sim.base_url(provider), api_key="sim-key")
    plan.add(Fault.reset(after_chunks=4))
    seen: list[StreamEvent] = []
    async with Client([source]) as client:
        with pytest.raises(StreamInterruptedError) as caught:
            await _consume(client, [QUESTION], seen)
        partial = caught.value.partial
        assert partial is not None
        streamed = "".join(e.text or "" for e in seen if e.type == "text")
        assert streamed
        assert partial.text == streamed
        assert (partial.interrupted, partial.finish_reason) == (True, "error")
        metadata = partial.message.metadata
        assert metadata is not None
        assert (metadata.provider, metadata.source_index, metadata.interrupted) == (
            provider,
            0,
            True,
        )
        assert metadata.started_at is not None
        assert metadata.duration is not None

        resumed = resume_interrupted([QUESTION, partial.message])
        assert [m.role for m in resumed] == ["user", "assistant", "user"]
        assert resumed[1].content == streamed
        assert resumed[1].reasoning_items == ()
        assert resumed[2] == Message(role="user", content=CONTINUE_PROMPT)
        answer = await client.complete(resumed)
    assert answer.interrupted is False
    assert answer.message.metadata is not None
    assert answer.message.metadata.interrupted is False
    assert answer.text.startswith(f"Simulated {model} answer")


def _cut_in_half(raw: bytes) -> bytes:
    """The recorded stream up to the event boundary nearest its middle."""
    separator = b"\r\n\r\n" if b"\r\n\r\n" in raw else b"\n\n"
    middle = raw.find(separator, len(raw) // 2)
    assert middle > 0
    return raw[: middle + len(separator)]


@pytest.mark.fixture_replay
@pytest.mark.parametrize(("name", "provider", "model", "url"), RECORDED_STREAMS)
async def test_recorded_stream_cut_in_half_is_interrupted(
    name: str, provider: str, model: str, url: str
) -> None:
    source = Source(provider, model, api_key="replay-key-0123")
    interaction = cassette(name).interactions[0]
    cut = _cut_in_half(interaction.response_raw)
    seen: list[StreamEvent] = []
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(url).mock(
            return_value=httpx.Response(
                200, content=cut, headers={"content-type": "text/event-stream"}
            )
        )
        async with Client([source]) as client:
            with pytest.raises(StreamInterruptedError) as caught:
                await _consume(client, [QUESTION], seen)
    assert route.call_count == 1
    partial = caught.value.partial
    assert partial is not None
    assert partial.interrupted is True
    assert partial.output_limited is False
    assert caught.value.error_type == "stream_incomplete"
    assert partial.text == "".join(e.text or "" for e in seen if e.type == "text")
    assert (partial.reasoning or "") == "".join(e.text or "" for e in seen if e.type == "reasoning")
    assert partial.text or partial.reasoning
    assert partial.message.metadata is not None
    assert partial.message.metadata.interrupted is True
    assert partial.message.metadata.provider == source.provider
    # Resuming keeps only the text: half-streamed reasoning carries no valid signature.
    resumed = resume_interrupted([QUESTION, partial.message])
    assert json.loads(json.dumps(resumed[1].to_dict())) == {
        "role": "assistant",
        "content": partial.text,
        "metadata": partial.message.metadata.to_dict(),
    }
    assert resumed[-1].content == CONTINUE_PROMPT


def test_a_conversation_that_is_not_interrupted_is_returned_unchanged() -> None:
    answered = Message(role="assistant", content="Done.")
    assert resume_interrupted([QUESTION, answered]) == [Message.coerce(QUESTION), answered]
    assert resume_interrupted([]) == []
    original = [QUESTION, answered]
    resume_interrupted(original)
    assert original == [QUESTION, answered]


def test_an_error_built_without_a_partial_gets_an_empty_interrupted_response() -> None:
    error = StreamInterruptedError("cut", provider="openai", source_index=1)
    partial = error.partial
    assert (partial.text, partial.reasoning, partial.tool_calls) == ("", None, [])
    assert (partial.finish_reason, partial.usage, partial.interrupted) == ("error", None, True)
    assert (partial.provider, partial.source_index, partial.model) == ("openai", 1, "")
    assert partial.message == Message(
        role="assistant",
        content="",
        metadata=MessageMetadata(provider="openai", source_index=1, interrupted=True),
    )
