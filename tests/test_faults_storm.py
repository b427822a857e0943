"""A fault storm: a few hundred calls, complete and stream, over every simulated wire, each
client with a primary and a fallback source, ~20 % of requests failing at random. Every call
must end in a response or a typed error, no text may reach the caller twice or out of place,
and the shared connection pool must be idle afterwards."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import anyio
import httpx
import pytest

from polythink import Client, Response, Source, Timeout
from polythink.errors import PolythinkError, StreamInterruptedError
from polythink.middleware.retry import RetryMiddleware, RetryPolicy
from polythink.simulator import Settings, Simulator
from polythink.simulator.behaviour import answer_for
from polythink.simulator.faults import Fault, FaultPlan
from polythink.types import Effort

CALLS = 300
PAIRS = (
    (("openai", "gpt-4o"), ("anthropic", "claude-haiku-4-5")),
    (("anthropic", "claude-haiku-4-5"), ("gemini", "gemini-3.8-flash")),
    (("gemini", "gemini-3.8-flash"), ("openai-responses", "gpt-5.5")),
    (("openai-responses", "gpt-5.5"), ("openai", "gpt-4o")),
)
MIX = (
    Fault.http(429, retry_after_ms=20),
    Fault.http(500),
    Fault.http(503),
    Fault.http(529),
    Fault.reset(),
    Fault.reset(after_chunks=3),
    Fault.stall(0.5),
    Fault.stall(0.5, after_chunks=3),
    Fault.malformed(),
    Fault.malformed(after_chunks=3),
    Fault.in_band("overloaded_error", after_chunks=0),
    Fault.in_band("overloaded_error", after_chunks=4),
    # Chunk 9 comes after the first text on every wire; chunks 0-4 before it on some.
    Fault.reset(after_chunks=9),
    Fault.stall(0.5, after_chunks=9),
    Fault.in_band("api_error", after_chunks=9),
)


@pytest.fixture(scope="module")
def storm() -> Iterator[tuple[Simulator, FaultPlan]]:
    plan = FaultPlan(rate=0.2, mix=MIX, seed=20261130)
    with Simulator(Settings(faults=plan)) as simulator:
        yield simulator, plan


def _expected(model: str, prompt: str) -> str:
    messages = [{"role": "user", "content": prompt}]
    return answer_for(model, prompt, Effort.NONE, 12, messages).text


class _Outcome:
    def __init__(self, index: int, streamed: bool) -> None:
        self.index = index
        self.streamed = streamed
        self.prompt = f"storm question {index}"
        self.texts: list[str] = []
        self.response: Response | None = None
        self.error: BaseException | None = None


@pytest.mark.anyio
async def test_fault_storm(storm: tuple[Simulator, FaultPlan]) -> None:
    sim, plan = storm
    timeout = Timeout(connect=2.0, first_byte=0.2, idle=0.2, total=5.0)
    http = httpx.AsyncClient(limits=httpx.Limits(max_connections=64))
    fast = RetryPolicy(max_retries=2, initial_delay=0.01, max_delay=0.04)
    clients = []
    for pair in PAIRS:
        sources = [
            Source(
                provider, model, api_key="sk-sim", base_url=sim.base_url(provider), timeout=timeout
            )
            for provider, model in pair
        ]
        client = Client(sources, http_client=http)
        client._retry = [RetryMiddleware(s, i, policy=fast) for i, s in enumerate(sources)]
        clients.append(client)
    outcomes = [_Outcome(i, streamed=i % 2 == 1) for i in range(CALLS)]
    limiter = anyio.CapacityLimiter(24)

    async def run(outcome: _Outcome) -> None:
        client = clients[outcome.index % len(clients)]
        messages = [{"role": "user", "content": outcome.prompt}]
        async with limiter:
            try:
                if outcome.streamed:
                    async for event in client.stream(messages):
                        if event.type == "text" and event.text is not None:
                            outcome.texts.append(event.text)
                        elif event.type == "done":
                            outcome.response = event.response
                else:
                    outcome.response = await client.complete(messages)
            except Exception as exc:
                outcome.error = exc

    for client in clients:
        client.start()
    async with anyio.create_task_group() as group:
        for outcome in outcomes:
            group.start_soon(run, outcome)
    for client in clients:
        await client.aclose()

    kinds: Counter[str] = Counter()
    answered: Counter[str] = Counter()
    for outcome in outcomes:
        pair = PAIRS[outcome.index % len(PAIRS)]
        if outcome.response is not None:
            kinds["ok"] += 1
            assert outcome.error is None
            provider, model = pair[outcome.response.source_index]
            answered[provider] += 1
            assert outcome.response.text == _expected(model, outcome.prompt)
            if outcome.streamed:
                assert "".join(outcome.texts) == outcome.response.text
            continue
        error = outcome.error
        assert isinstance(error, PolythinkError), repr(error)
        kinds[type(error).__name__] += 1
        if isinstance(error, StreamInterruptedError):
            assert error.partial is not None
            assert "".join(outcome.texts) == error.partial.text
            _, model = pair[error.partial.source_index]
            assert _expected(model, outcome.prompt).startswith(error.partial.text)
        else:
            assert outcome.texts == []

    assert kinds["ok"] >= CALLS * 0.85
    assert sum(kinds.values()) == CALLS
    assert set(answered) == {"openai", "anthropic", "gemini", "openai-responses"}
    injected = sum(plan.injected.values())
    assert 0.15 * CALLS <= injected <= 0.4 * CALLS
    assert set(plan.injected) == {fault.label for fault in MIX}

    pool = http._transport._pool  # type: ignore[attr-defined]
    assert pool._requests == []
    assert all(connection.is_idle() for connection in pool.connections)
    await http.aclose()
