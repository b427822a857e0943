"""SyncClient: the async client driven from its own thread behaves as the async one does.

Every test runs against the simulator: a blocking call from the test's thread, from several
threads at once, from inside a running event loop, closed from another thread, interrupted,
and a stream left early.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import signal
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import anyio
import pytest

from polythink import (
    Client,
    CompleteNext,
    Passthrough,
    Request,
    Response,
    Source,
    SyncClient,
)
from polythink.errors import (
    ClientClosedError,
    PolythinkError,
    RateLimitedError,
    RequestRejectedError,
    StreamInterruptedError,
)
from polythink.simulator import Simulator
from polythink.simulator.faults import Fault, FaultPlan
from tests import sim_support

PROMPT = [{"role": "user", "content": "why is the sky blue"}]

sim, clean = sim_support.sim, sim_support.clean  # the module's simulator, reset per test


def source(sim: Simulator, **options: Any) -> Source:
    return Source("openai", "o3", base_url=sim.base_url("openai"), api_key="sim", **options)


def wait_until(condition: Any, seconds: float = 10.0) -> None:
    """Poll ``condition`` (the simulator sees a hang-up on its own thread)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


def test_the_same_parameters_as_the_async_client() -> None:
    for name in ("complete", "stream"):
        sync = inspect.signature(getattr(SyncClient, name)).parameters
        assert list(sync) == list(inspect.signature(getattr(Client, name)).parameters)
    assert list(inspect.signature(SyncClient).parameters) == list(
        inspect.signature(Client).parameters
    )


def test_complete_and_stream_answer_as_the_async_client_does(sim: Simulator) -> None:
    async def asynchronous() -> tuple[Response, list[str]]:
        async with Client([source(sim)]) as client:
            answer = await client.complete(PROMPT, reasoning_effort="xhigh")
            kinds = [event.type async for event in client.stream(PROMPT)]
        return answer, kinds

    expected, expected_kinds = anyio.run(asynchronous)
    with SyncClient([source(sim)]) as client:
        answer = client.complete(PROMPT, reasoning_effort="xhigh")
        events = list(client.stream(PROMPT))
    assert (answer.text, answer.usage, answer.requested_effort, answer.applied_effort) == (
        expected.text,
        expected.usage,
        expected.requested_effort,
        expected.applied_effort,
    )
    assert [event.type for event in events] == expected_kinds
    assert events[-1].response is not None
    assert events[-1].response.text == expected.text
    assert events[-1].response.message.metadata is not None


def test_errors_are_the_async_clients(sim: Simulator) -> None:
    def faults() -> FaultPlan:
        return FaultPlan([Fault.http(400), Fault.http(429, retry_after_ms=1)])

    def outcome(error: PolythinkError) -> tuple[Any, ...]:
        return (type(error), error.status_code, error.error_type, str(error))

    async def asynchronous() -> list[tuple[Any, ...]]:
        seen = []
        async with Client([source(sim, max_retries=0)]) as client:
            for _ in range(2):
                try:
                    await client.complete(PROMPT)
                except PolythinkError as exc:
                    seen.append(outcome(exc))
        return seen

    sim.settings.faults = faults()
    expected = anyio.run(asynchronous)
    sim.settings.faults = faults()
    seen = []
    with SyncClient([source(sim, max_retries=0)]) as client:
        for _ in range(2):
            with pytest.raises(PolythinkError) as caught:
                client.complete(PROMPT)
            seen.append(outcome(caught.value))
        with pytest.raises(ValueError, match="temperature must be a number from 0 to 2"):
            client.complete(PROMPT, temperature=5)
    assert [kind for kind, *_ in seen] == [RequestRejectedError, RateLimitedError]
    assert seen == expected


def test_a_stream_cut_mid_way_raises_with_its_partial(sim: Simulator) -> None:
    sim.settings.faults = FaultPlan([Fault.reset(after_chunks=4)])
    texts: list[str] = []

    def read(client: SyncClient) -> None:
        for event in client.stream(PROMPT):
            if event.type == "text":
                texts.append(event.text)

    with SyncClient([source(sim)]) as client, pytest.raises(StreamInterruptedError) as caught:
        read(client)
    assert texts
    assert caught.value.partial.text == "".join(texts)
    assert caught.value.partial.interrupted


def test_a_stream_left_early_releases_its_connection(sim: Simulator) -> None:
    # 200 words at one every 50 ms: ten seconds of stream if it were read to the end.
    sim.settings.chunk_delay = 0.05
    sim.settings.answer_words = 200
    with SyncClient([source(sim)], http="httpx") as client:
        events = client.stream(PROMPT)
        for event in events:
            if event.type == "text":
                break
        events.close()
        # close() returned once the stream was closed: the pool holds no request.
        assert client._client._http is not None
        pool = client._client._http._transport._pool  # type: ignore[attr-defined]
        assert pool._requests == []
        wait_until(lambda: sim.stats.in_flight == 0, seconds=2.0)
        sim.settings.chunk_delay = 0.0
        assert client.complete(PROMPT).text.startswith("Simulated o3 answer")


class Meet(Passthrough):
    """Holds each call until ``count`` calls are in this layer at once."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.arrived = 0
        self.together: anyio.Event | None = None

    async def complete(self, request: Request, call_next: CompleteNext) -> Response:
        if self.together is None:
            self.together = anyio.Event()
        self.arrived += 1
        if self.arrived == self.count:
            self.together.set()
        with anyio.fail_after(10):
            await self.together.wait()
        return await call_next(request)


def test_threads_share_one_client_and_run_at_once(sim: Simulator) -> None:
    meet = Meet(8)
    answers: list[str] = []
    errors: list[BaseException] = []
    with SyncClient([source(sim)], middleware=[meet]) as client:

        def ask(i: int) -> None:
            try:
                answers.append(client.complete([{"role": "user", "content": f"q{i}"}]).text)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(20)
    # Every call waited for the eight to be in flight together: they ran concurrently.
    assert errors == []
    assert sorted(a.split(" to: ")[1].split(" ")[0] for a in answers) == [f"q{i}" for i in range(8)]
    assert sim.stats.requests == 8


def test_close_from_another_thread_ends_the_calls_in_flight(sim: Simulator) -> None:
    # A stall notices the hang-up at once (a plain latency would not until it ends).
    sim.settings.faults = FaultPlan([Fault.stall(30.0)])
    client = SyncClient([source(sim, max_retries=0)])
    client.start()
    outcomes: list[BaseException] = []

    def ask() -> None:
        try:
            client.complete(PROMPT)
        except BaseException as exc:
            outcomes.append(exc)

    caller = threading.Thread(target=ask)
    caller.start()
    wait_until(lambda: sim.stats.in_flight == 1)
    loop_threads = {t for t in threading.enumerate() if t.name == "polythink-sync"}
    assert len(loop_threads) == 1
    client.close()
    caller.join(10)
    assert not caller.is_alive()
    assert [type(e) for e in outcomes] == [ClientClosedError]
    assert "close() ran" in str(outcomes[0])
    assert not any(t.is_alive() for t in loop_threads)
    with pytest.raises(ClientClosedError):
        client.complete(PROMPT)
    client.close()  # again: nothing to do
    with client:  # opens again
        assert client.complete(PROMPT).text.endswith("why is the sky blue")


def test_close_from_another_thread_ends_a_stream_being_read(sim: Simulator) -> None:
    sim.settings.chunk_delay = 0.05
    sim.settings.answer_words = 200
    client = SyncClient([source(sim)])
    texts: list[str] = []
    outcomes: list[BaseException] = []

    def read() -> None:
        try:
            for event in client.stream(PROMPT):
                if event.type == "text":
                    texts.append(event.text)
        except BaseException as exc:
            outcomes.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    wait_until(lambda: len(texts) >= 2)
    client.close()
    reader.join(10)
    assert [type(e) for e in outcomes] == [ClientClosedError]
    wait_until(lambda: sim.stats.in_flight == 0, seconds=2.0)


def test_works_inside_a_running_event_loop(sim: Simulator) -> None:
    async def notebook_cell() -> tuple[str, list[str]]:
        # A notebook's thread runs an event loop; the blocking calls still work there.
        with SyncClient([source(sim)]) as client:
            text = client.complete(PROMPT).text
            kinds = [event.type for event in client.stream(PROMPT)]
        return text, kinds

    text, kinds = asyncio.run(notebook_cell())
    assert text.endswith("why is the sky blue")
    assert kinds[-1] == "done"
    text, _ = anyio.run(notebook_cell)
    assert text.endswith("why is the sky blue")


def test_an_interrupted_call_is_cancelled_as_an_async_task_would_be(sim: Simulator) -> None:
    # A stall notices the hang-up at once (a plain latency would not until it ends).
    sim.settings.faults = FaultPlan([Fault.stall(30.0)])
    with SyncClient([source(sim, max_retries=0)]) as client:
        main = threading.get_ident()

        def press_ctrl_c() -> None:
            wait_until(lambda: sim.stats.in_flight == 1)
            signal.pthread_kill(main, signal.SIGINT)

        timer = threading.Thread(target=press_ctrl_c)
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            client.complete(PROMPT)
        timer.join(10)
        # The call's task was cancelled: its connection closed, the client still usable.
        wait_until(lambda: sim.stats.in_flight == 0, seconds=2.0)
        assert client.complete(PROMPT).text.endswith("why is the sky blue")


def test_built_from_a_toml_file_with_layers_given_in_code(sim: Simulator, tmp_path: Path) -> None:
    path = tmp_path / "sources.toml"
    path.write_text(
        f'[[source]]\nprovider = "openai"\nmodel = "o3"\nbase_url = "{sim.base_url("openai")}"\n'
        'api_key = "sim"\nreasoning_effort = "medium"\n'
    )
    seen: list[Any] = []

    class Tier(Passthrough):
        async def complete(self, request: Request, call_next: CompleteNext) -> Response:
            response = await call_next(request)
            seen.append(response.applied_effort)
            return response

    with SyncClient.from_toml(path, middleware=[Tier()]) as client:
        assert isinstance(client, SyncClient)
        assert client.sources[0].model == "o3"
        client.complete(PROMPT)
    assert [e.value for e in seen] == ["medium"]


def test_a_bad_configuration_fails_in_the_caller_before_any_thread(sim: Simulator) -> None:
    before = threading.active_count()
    with pytest.raises(ValueError, match="Client needs at least one Source"):
        SyncClient([])
    with pytest.raises(ValueError, match="wrap the one source"):
        SyncClient(source(sim))  # type: ignore[arg-type]
    assert threading.active_count() == before


def test_an_open_client_collected_warns_and_ends_its_thread(sim: Simulator) -> None:
    client = SyncClient([source(sim)])
    client.complete(PROMPT)  # the first call starts it
    (loop,) = [t for t in threading.enumerate() if t.name == "polythink-sync"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del client
        gc.collect()
    assert any(
        issubclass(w.category, ResourceWarning) and "was started and never closed" in str(w.message)
        for w in caught
    )
    loop.join(5)
    assert not loop.is_alive()
