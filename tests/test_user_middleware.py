"""The caller's own middleware, at the two positions: what each sees, what each may do, and
the clear error a layer that breaks the contract gets.

Tiers come from the capability registry's documented facts: ``o3`` accepts low, medium and
high (OpenAI reasoning guide, registry evidence), so ``xhigh`` is sent as ``high``.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import AsyncGenerator
from typing import Any

import pytest
import respx

from polythink import (
    Client,
    CompleteNext,
    Effort,
    Message,
    MiddlewareError,
    Passthrough,
    Request,
    Response,
    Source,
    StreamEvent,
    StreamNext,
)
from polythink.errors import (
    PolythinkError,
    RateLimitedError,
    RequestRejectedError,
    TransientError,
)
from polythink.middleware.base import UserLayer
from polythink.reasoning import Capability
from polythink.simulator import Simulator
from polythink.simulator.faults import Fault, FaultPlan
from tests import sim_support

pytestmark = pytest.mark.anyio

PROMPT = [{"role": "user", "content": "why is the sky blue"}]

sim, clean = sim_support.sim, sim_support.clean  # the module's simulator, reset per test
ANSWER = {  # an OpenAI Chat Completions answer, the shape of the API reference's example
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "gpt-4o",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
}


def source(sim: Simulator, model: str = "o3", **options: Any) -> Source:
    return Source("openai", model, base_url=sim.base_url("openai"), api_key="sim", **options)


class Record(Passthrough):
    """Writes down what it sees, one tuple per request and per outcome."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    def note(self, request: Request) -> None:
        resolution = request.resolution
        applied = resolution.applied_effort if resolution is not None else "unresolved"
        self.seen.append(("request", request.reasoning_effort, applied))

    async def complete(self, request: Request, call_next: CompleteNext) -> Response:
        self.note(request)
        try:
            response = await call_next(request)
        except PolythinkError as exc:
            self.seen.append(("error", type(exc).__name__, exc.status_code))
            raise
        self.seen.append(("response", response.source_index, response.cache_hit))
        return response

    async def stream(
        self, request: Request, call_next: StreamNext
    ) -> AsyncGenerator[StreamEvent, None]:
        self.note(request)
        try:
            async for event in call_next(request):
                if event.type == "done" and event.response is not None:
                    self.seen.append(("done", event.response.source_index))
                yield event
        except PolythinkError as exc:
            self.seen.append(("error", type(exc).__name__, exc.status_code))
            raise


async def test_each_position_sees_its_tier_and_its_calls(sim: Simulator) -> None:
    outer, inner = Record(), Record()
    async with Client([source(sim, middleware=[inner])], middleware=[outer], cache=True) as client:
        first = await client.complete(PROMPT, reasoning_effort="xhigh")
        again = await client.complete(PROMPT, reasoning_effort="xhigh")
    assert (first.requested_effort, first.applied_effort) == (Effort.XHIGH, Effort.HIGH)
    assert again.cache_hit
    assert outer.seen == [
        ("request", Effort.XHIGH, "unresolved"),
        ("response", 0, False),
        ("request", Effort.XHIGH, "unresolved"),
        ("response", 0, True),
    ]
    # The hit sent nothing: the source's layer saw the one attempt, with the tier sent.
    assert inner.seen == [("request", Effort.XHIGH, Effort.HIGH), ("response", 0, False)]
    assert sim.stats.requests == 1


async def test_a_source_layer_sees_every_retry_and_failover_hop(sim: Simulator) -> None:
    sim.settings.faults = FaultPlan(
        [Fault.http(503, retry_after_ms=1), Fault.http(429, retry_after_ms=1)]
    )
    outer, first, second = Record(), Record(), Record()
    sources = [
        source(sim, max_retries=1, middleware=[first]),
        source(sim, max_retries=0, middleware=[second]),
    ]
    async with Client(sources, middleware=[outer]) as client:
        response = await client.complete(PROMPT, reasoning_effort="low")
    assert response.source_index == 1
    assert first.seen == [
        ("request", Effort.LOW, Effort.LOW),
        ("error", "TransientError", 503),
        ("request", Effort.LOW, Effort.LOW),
        ("error", "RateLimitedError", 429),
    ]
    assert second.seen == [("request", Effort.LOW, Effort.LOW), ("response", 1, False)]
    assert outer.seen == [("request", Effort.LOW, "unresolved"), ("response", 1, False)]
    assert sim.stats.requests == 3


async def test_streams_pass_both_positions_once_per_call_and_attempt(sim: Simulator) -> None:
    sim.settings.faults = FaultPlan([Fault.http(503, retry_after_ms=1)])
    outer, inner = Record(), Record()
    async with Client(
        [source(sim, max_retries=1, middleware=[inner])], middleware=[outer]
    ) as client:
        events = [event async for event in client.stream(PROMPT)]
    assert events[-1].type == "done"
    assert outer.seen == [("request", None, "unresolved"), ("done", 0)]
    assert inner.seen == [
        ("request", None, None),
        ("error", "TransientError", 503),
        ("request", None, None),
        ("done", 0),
    ]


class Redact(Passthrough):
    """Masks a word in what is sent and refuses a prompt with a marker, before sending."""

    def check(self, request: Request) -> Request:
        if any("SECRET" in message.text() for message in request.messages):
            raise RequestRejectedError("refused before sending", error_type="guardrail")
        return request.with_(
            messages=tuple(
                m.with_(content=m.text().replace("blue", "[colour]")) for m in request.messages
            )
        )

    async def complete(self, request: Request, call_next: CompleteNext) -> Response:
        return await call_next(self.check(request))

    def stream(self, request: Request, call_next: StreamNext) -> AsyncGenerator[StreamEvent, None]:
        return call_next(self.check(request))


@pytest.mark.parametrize("stream", [False, True])
async def test_a_layer_changes_the_request_or_refuses_it_before_sending(
    sim: Simulator, stream: bool
) -> None:
    async with Client([source(sim)], middleware=[Redact()], cache=True) as client:

        async def call(text: str) -> Response:
            messages = [{"role": "user", "content": text}]
            if not stream:
                return await client.complete(messages)
            events = [event async for event in client.stream(messages)]
            assert events[-1].response is not None
            return events[-1].response

        answer = await call("why is the sky blue")
        # The simulator's answer ends with the prompt it received.
        assert answer.text.endswith(" to: why is the sky [colour]")
        with pytest.raises(RequestRejectedError, match="refused before sending") as caught:
            await call("the SECRET plan")
    assert caught.value.error_type == "guardrail"
    assert sim.stats.requests == 1


async def test_a_layer_may_answer_without_calling_next(sim: Simulator) -> None:
    canned = Response(
        text="canned",
        reasoning=None,
        tool_calls=[],
        finish_reason="stop",
        usage=None,
        model="none",
        provider="local",
        source_index=0,
        message=Message(role="assistant", content="canned"),
    )

    class Canned(Passthrough):
        async def complete(self, request: Request, call_next: CompleteNext) -> Response:
            return canned

        async def stream(
            self, request: Request, call_next: StreamNext
        ) -> AsyncGenerator[StreamEvent, None]:
            yield StreamEvent("text", text="canned")
            yield StreamEvent("done", response=canned)

    async with Client([source(sim)], middleware=[Canned()]) as client:
        assert (await client.complete(PROMPT)).text == "canned"
        kinds = [event.type async for event in client.stream(PROMPT)]
    assert kinds == ["text", "done"]
    assert sim.stats.requests == 0


async def test_an_error_a_source_layer_raises_is_retried_and_failed_over(sim: Simulator) -> None:
    class FlakyOnce(Passthrough):
        def __init__(self) -> None:
            self.calls = 0

        async def complete(self, request: Request, call_next: CompleteNext) -> Response:
            self.calls += 1
            if self.calls == 1:
                raise TransientError("gateway hiccup", error_type="local")
            return await call_next(request)

    class Quota(Passthrough):
        async def complete(self, request: Request, call_next: CompleteNext) -> Response:
            raise RateLimitedError("over this customer's quota", error_type="quota")

    flaky = FlakyOnce()
    async with Client([source(sim, max_retries=1, middleware=[flaky])]) as client:
        answer = await client.complete(PROMPT)
    assert (flaky.calls, answer.source_index, sim.stats.requests) == (2, 0, 1)
    sources = [source(sim, max_retries=0, middleware=[Quota()]), source(sim)]
    async with Client(sources) as client:
        answer = await client.complete(PROMPT)
    assert answer.source_index == 1
    assert answer.warnings[-1].startswith("failover: source 0 (openai o3) failed")


async def test_any_other_exception_reaches_the_caller_unchanged(sim: Simulator) -> None:
    mistake = KeyError("customer")

    class Buggy(Passthrough):
        async def complete(self, request: Request, call_next: CompleteNext) -> Response:
            raise mistake

    async with Client([source(sim, max_retries=2, middleware=[Buggy()]), source(sim)]) as client:
        with pytest.raises(KeyError) as caught:
            await client.complete(PROMPT)
    assert caught.value is mistake
    assert sim.stats.requests == 0  # neither retried nor failed over


async def test_a_header_set_by_a_source_layer_goes_on_the_wire_of_that_source_only() -> None:
    customer: contextvars.ContextVar[str] = contextvars.ContextVar("customer")

    class CustomerHeader(Passthrough):
        async def complete(self, request: Request, call_next: CompleteNext) -> Response:
            headers = {**(request.extra_headers or {}), "X-Customer-Id": customer.get()}
            return await call_next(request.with_(extra_headers=headers))

    sources = [
        Source(
            "openai",
            "gpt-4o",
            api_key="sk-one",
            base_url="https://one.example/v1",
            max_retries=0,
            headers={"x-team": "t1"},
            middleware=[CustomerHeader()],
        ),
        Source("openai", "gpt-4o", api_key="sk-two", base_url="https://two.example/v1"),
    ]
    with respx.mock() as router:
        one = router.post("https://one.example/v1/chat/completions").respond(503, json={})
        two = router.post("https://two.example/v1/chat/completions").respond(200, json=ANSWER)
        async with Client(sources) as client:
            customer.set("c-42")  # set in the caller's task; read in the layer's
            await client.complete(PROMPT)
    sent, other = one.calls.last.request.headers, two.calls.last.request.headers
    assert (sent["x-customer-id"], sent["x-team"], sent["authorization"]) == (
        "c-42",
        "t1",
        "Bearer sk-one",
    )
    assert "x-customer-id" not in other
    assert "x-customer-id" not in repr(Request(messages=(), extra_headers={"a": "b"}))


async def test_the_client_layer_may_set_headers_for_every_source(sim: Simulator) -> None:
    class Short(Passthrough):
        def stream(
            self, request: Request, call_next: StreamNext
        ) -> AsyncGenerator[StreamEvent, None]:
            # The simulator reads this header: the answer's length proves it arrived.
            return call_next(request.with_(extra_headers={"x-sim-answer-words": "3"}))

    async with Client([source(sim)], middleware=[Short()]) as client:
        texts = [e.text async for e in client.stream(PROMPT) if e.type == "text"]
    assert len(texts) == 3


async def test_a_stream_layer_may_rewrite_events(sim: Simulator) -> None:
    class Upper(Passthrough):
        async def stream(
            self, request: Request, call_next: StreamNext
        ) -> AsyncGenerator[StreamEvent, None]:
            async for event in call_next(request):
                if event.type == "text" and event.text is not None:
                    event = StreamEvent("text", text=event.text.upper())
                yield event

    async with Client([source(sim)], middleware=[Upper()]) as client:
        events = [event async for event in client.stream(PROMPT)]
    text = "".join(e.text for e in events if e.type == "text" and e.text is not None)
    assert events[-1].response is not None
    assert text == events[-1].response.text.upper()


# The contract, checked around the caller's layers only.


class ReturnsDict(Passthrough):
    async def complete(self, request: Request, call_next: CompleteNext) -> Any:
        await call_next(request)
        return {"text": "hi"}


class NoDone(Passthrough):
    async def stream(self, request: Request, call_next: StreamNext) -> Any:
        async for event in call_next(request):
            if event.type != "done":
                yield event


class AfterDone(Passthrough):
    async def stream(self, request: Request, call_next: StreamNext) -> Any:
        async for event in call_next(request):
            yield event
        yield StreamEvent("text", text="late")


class YieldsText(Passthrough):
    async def stream(self, request: Request, call_next: StreamNext) -> Any:
        async for event in call_next(request):
            yield event.text


class DoneWithoutResponse(Passthrough):
    async def stream(self, request: Request, call_next: StreamNext) -> Any:
        async for event in call_next(request):
            yield StreamEvent("done") if event.type == "done" else event


class ReturnsList(Passthrough):
    def stream(self, request: Request, call_next: StreamNext) -> Any:
        return []


class PassesDict(Passthrough):
    async def complete(self, request: Request, call_next: CompleteNext) -> Response:
        return await call_next({"messages": request.messages})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("layer", "stream", "problem"),
    [
        (ReturnsDict(), False, "returned dict from complete(); return a Response"),
        (NoDone(), True, "ended its stream without a 'done' event"),
        (AfterDone(), True, "yielded a 'text' event after its 'done' event"),
        (YieldsText(), True, "yielded str from stream(); yield StreamEvent values"),
        (DoneWithoutResponse(), True, "yielded a 'done' event whose response is None"),
        (ReturnsList(), True, "returned list from stream(); return an async iterator"),
        (PassesDict(), False, "called call_next with dict; pass a Request"),
    ],
)
@pytest.mark.parametrize("position", ["client", "source"])
async def test_a_layer_breaking_the_contract_is_named(
    sim: Simulator, layer: Any, stream: bool, problem: str, position: str
) -> None:
    if position == "client":
        client = Client([source(sim), source(sim)], middleware=[Record(), layer])
        where = "Client middleware[1]"
    else:
        client = Client([source(sim, middleware=[layer]), source(sim)])
        where = "sources[0] (openai/o3) middleware[0]"

    async def call() -> object:
        if stream:
            return [event async for event in client.stream(PROMPT)]
        return await client.complete(PROMPT)

    async with client:
        with pytest.raises(MiddlewareError) as caught:
            await call()
    error = caught.value
    name = f"{type(layer).__name__} ({where})"
    assert error.layer == name
    assert str(error).startswith(f"middleware {name} {problem}")
    assert isinstance(error, TypeError)
    # Not failed over: the second source was never asked.
    assert sim.stats.by_path["/openai/v1/chat/completions"] <= 1
    assert error.source_index == (0 if position == "source" else None)


class OnlyComplete:
    async def complete(self, request: Request, call_next: CompleteNext) -> Response:
        return await call_next(request)


class SyncComplete(Passthrough):
    def complete(self, request: Request, call_next: CompleteNext) -> Any:
        return call_next(request)


class AsyncStreamWithoutYield(Passthrough):
    async def stream(self, request: Request, call_next: StreamNext) -> Any:
        return call_next(request)


@pytest.mark.parametrize(
    ("layers", "message"),
    [
        (Redact(), "Client middleware must be a list of layers .* got Redact; wrap the one"),
        ([Redact], r"Redact \(Client middleware\[0\]\) is a class; pass an instance: Redact\(\)"),
        ([OnlyComplete()], r"OnlyComplete \(Client middleware\[0\]\) has no stream\(request, "),
        ([SyncComplete()], r"complete must be an async method"),
        ([AsyncStreamWithoutYield()], "an 'async def' without 'yield'"),
    ],
)
def test_an_unusable_layer_is_refused_when_the_client_is_built(layers: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Client([Source("openai", "o3", api_key="sk-test")], middleware=layers)


def test_a_source_layer_list_is_checked_by_the_source_and_the_client() -> None:
    with pytest.raises(ValueError, match=r"Source.middleware must be a list .* wrap the one"):
        Source("openai", "o3", api_key="sk-test", middleware=Redact())  # type: ignore[arg-type]
    bad = Source("openai", "o3", api_key="sk-test", middleware=[Redact])  # type: ignore[list-item]
    with pytest.raises(ValueError, match=r"Redact \(sources\[0\] \(openai/o3\) middleware\[0\]\)"):
        Client([bad])
    layered = Source("openai", "o3", api_key="sk-test", middleware=[Redact()])
    assert layered == Source("openai", "o3", api_key="sk-test")
    assert "middleware" not in repr(layered)


def test_a_toml_source_with_middleware_is_told_layers_are_code(tmp_path: Any) -> None:
    path = tmp_path / "sources.toml"
    path.write_text('[[source]]\nprovider = "openai"\nmodel = "o3"\nmiddleware = ["x"]\n')
    with pytest.raises(ValueError, match=r"middleware is code, not configuration"):
        Client.from_toml(path)


async def test_no_layer_given_folds_the_built_ins_alone_and_inherited_methods_are_left_out() -> (
    None
):
    async with Client([Source("openai", "o3", api_key="sk-test")]) as plain:
        assert not any(isinstance(layer, UserLayer) for layer in plain._call_layers())
        assert plain._chain is not None
        assert plain._chain.complete.func == plain._telemetry.complete  # type: ignore[attr-defined]

    class CompleteOnly(Passthrough):
        async def complete(self, request: Request, call_next: CompleteNext) -> Response:
            return await call_next(request)

    only = CompleteOnly()
    async with Client([Source("openai", "o3", api_key="sk-test")], middleware=[only]) as client:
        chain = client._chain
        assert chain is not None
        # Its stream is Passthrough's: the chain's stream starts at telemetry, as without it.
        assert chain.stream.func == client._telemetry.stream  # type: ignore[attr-defined]
        assert chain.complete.__self__.layer.layer is only  # type: ignore[attr-defined]


async def test_a_request_is_never_changed_by_a_layer_deriving_another(sim: Simulator) -> None:
    seen: list[Request] = []

    class Derive(Passthrough):
        async def complete(self, request: Request, call_next: CompleteNext) -> Response:
            seen.append(request)
            return await call_next(request.with_(max_tokens=50, extra_headers={"x-a": "1"}))

    async with Client([source(sim, middleware=[Record()])], middleware=[Derive()]) as client:
        await client.complete(PROMPT, max_tokens=80)
    assert (seen[0].max_tokens, seen[0].extra_headers) == (80, None)
    with pytest.raises(TypeError, match="max_tokenz"):
        seen[0].with_(max_tokenz=1)


async def test_the_wire_body_is_unchanged_by_extra_headers() -> None:
    class Tag(Passthrough):
        async def complete(self, request: Request, call_next: CompleteNext) -> Response:
            return await call_next(request.with_(extra_headers={"x-tag": "t"}))

    source = Source("openai", "gpt-4o", api_key="sk-test", base_url="https://x.example/v1")
    with respx.mock() as router:
        route = router.post("https://x.example/v1/chat/completions").respond(200, json=ANSWER)
        async with Client([source], middleware=[Tag()]) as client:
            await client.complete(PROMPT)
    sent = route.calls.last.request
    assert json.loads(sent.content) == {"model": "gpt-4o", "messages": PROMPT, "stream": False}
    assert sent.headers["x-tag"] == "t"


async def test_leaving_a_stream_early_closes_every_layer_and_the_connection(
    sim: Simulator,
) -> None:
    sim.settings.chunk_delay = 0.02
    closed: list[str] = []

    class Watch(Passthrough):
        def __init__(self, name: str) -> None:
            self.name = name

        async def stream(
            self, request: Request, call_next: StreamNext
        ) -> AsyncGenerator[StreamEvent, None]:
            try:
                async for event in call_next(request):
                    yield event
            finally:
                closed.append(self.name)

    try:
        sources = [source(sim, middleware=[Watch("source")])]
        async with Client(sources, middleware=[Watch("client")], http="httpx") as client:
            events = client.stream(PROMPT)
            async for event in events:
                if event.type == "text":
                    break
            await events.aclose()  # no MiddlewareError: leaving early is not a missing 'done'
            # Each layer closes as it is left; the client's layer, written without aclosing,
            # has its inner stream closed for it, down to the transport.
            assert closed == ["client", "source"]
            assert client._http is not None
            pool = client._http._transport._pool  # type: ignore[attr-defined]
            assert pool._requests == []
    finally:
        sim.settings.chunk_delay = 0.0


async def test_a_source_layer_sees_the_resend_after_a_reasoning_rejection(
    sim: Simulator,
) -> None:
    # The simulator plays gpt-5.5 as taking low, medium and high only; the registry says up to
    # xhigh, so xhigh is sent, refused with OpenAI's 400, learned, and sent again as high.
    sim.settings.capabilities = {
        "gpt-5.5": Capability("gpt-5.5", ("low", "medium", "high"), default_effort="medium")
    }
    outer, inner = Record(), Record()
    try:
        sources = [source(sim, "gpt-5.5", middleware=[inner])]
        async with Client(sources, middleware=[outer], capabilities_store=False) as client:
            answer = await client.complete(PROMPT, reasoning_effort="xhigh")
    finally:
        sim.settings.capabilities = {}
    assert answer.applied_effort == Effort.HIGH
    assert inner.seen == [
        ("request", Effort.XHIGH, Effort.XHIGH),
        ("error", "ThinkingUnsupportedError", 400),
        ("request", Effort.XHIGH, Effort.HIGH),
        ("response", 0, False),
    ]
    assert outer.seen == [("request", Effort.XHIGH, "unresolved"), ("response", 0, False)]
