"""Batches: built by the same body builders as calls, submitted to each provider's batch API,
saved and resumed in a new client, read back typed, in order, priced at batch rates, under
the same budgets — against the simulator's batch APIs on a clock the tests move by hand.

Shapes (read 2026-12-04): openai-python 3.63.0 ``types/batch.py`` and
``batch_create_params.py``; anthropic-sdk-python 2.17.0 ``types/messages/message_batch*.py``
and ``batch_create_params.py``; google-genai 3.6.1 ``batches.py`` (``_BatchJobSource_to_mldev``,
``_BatchJob_from_mldev``). Prices: genai-prices' own ``calc_price`` with
``price_context={"processing": "batch"}``, never read back from polythink.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import genai_prices
import httpx
import pydantic
import pytest

from polythink import (
    Budget,
    BudgetExceededError,
    Client,
    Effort,
    InvalidInputError,
    Response,
    Source,
)
from polythink.backends.local import LocalBudgets
from polythink.batch import BatchJob
from polythink.errors import (
    BatchItemNotRunError,
    OutputValidationError,
    RequestRejectedError,
    ThinkingUnsupportedError,
)
from polythink.simulator import Settings, Simulator
from polythink.simulator.batches import BatchTiming
from tests.budget_support import nano
from tests.conftest import sdk_module
from tests.sdk_types import check_request, check_response

openai_batch = sdk_module("openai.types.batch")
openai_batch_params = sdk_module("openai.types.batch_create_params")
openai_file = sdk_module("openai.types.file_object")
openai_chat_params = sdk_module("openai.types.chat.completion_create_params")
openai_chat = sdk_module("openai.types.chat")
anthropic_batches = sdk_module("anthropic.types.messages")
anthropic_batch_params = sdk_module("anthropic.types.messages.batch_create_params")
genai_types = sdk_module("google.genai.types")
genai_batches = sdk_module("google.genai.batches")

START = 1_790_000_000.0
"""The batch clock's start (2026-09-21, Unix seconds)."""
TIMING = BatchTiming(validating=60.0, running=3600.0, finalizing=60.0)
PRIME = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a prime."}]


class Answer(pydantic.BaseModel):
    """A structured answer (importable by path, so a resumed job parses into it again)."""

    answer: str


class Clock:
    """The simulator's batch clock, moved by the tests (Unix seconds)."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def clock() -> Clock:
    return Clock()


@pytest.fixture(scope="module")
def sim(clock: Clock) -> Iterator[Simulator]:
    with Simulator(Settings(batch_clock=clock, batch_timing=TIMING)) as running:
        yield running


@pytest.fixture(autouse=True)
def fresh(sim: Simulator, clock: Clock) -> Iterator[None]:
    clock.now = START
    sim.settings.batch_timing = TIMING
    yield
    sim.settings.batch_store = None


def _source(sim: Simulator, provider: str, model: str, **kw: Any) -> Source:
    return Source(provider, model, api_key="sim", base_url=sim.base_url(provider), **kw)


class Recorder:
    """What polythink sent: (method, path, body bytes) per request, through httpx's hook."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, bytes]] = []

    async def __call__(self, request: httpx.Request) -> None:
        self.sent.append((request.method, request.url.path, request.content))

    def json(self, index: int) -> Any:
        return json.loads(self.sent[index][2])


def _upload_lines(body: bytes) -> list[Any]:
    """The JSONL lines of a multipart upload's ``file`` part."""
    text = body.decode()
    start = text.index("\r\n\r\n", text.index('name="file"')) + 4
    part = text[start : text.index("\r\n--", start)]
    return [json.loads(line) for line in part.splitlines() if line]


def _batch_price(response: Response, provider: str) -> int:
    usage = response.usage
    assert usage is not None
    counts = {
        k: v
        for k, v in {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cache_read_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
        }.items()
        if v is not None
    }
    found = genai_prices.calc_price(
        genai_prices.Usage(**counts),
        response.model,
        provider_id=provider,
        price_context={"processing": "batch"},
    )
    return nano(found.total_price)


# ---------------------------------------------------------------- exact request files


EXACT: dict[str, tuple[str, str, Any]] = {
    "openai": (
        "gpt-5.5",
        "/v1/chat/completions",
        {
            "model": "gpt-5.5",
            "messages": PRIME,
            "stream": False,
            "max_completion_tokens": 200,
            "reasoning_effort": "low",
        },
    ),
    "openai-responses": (
        "gpt-5.5",
        "/v1/responses",
        {
            "model": "gpt-5.5",
            "input": [{"role": "user", "content": "Name a prime."}],
            "instructions": "Be brief.",
            "stream": False,
            "include": ["reasoning.encrypted_content"],
            "max_output_tokens": 200,
            "reasoning": {"effort": "low"},
        },
    ),
    "anthropic": (
        "claude-haiku-5-5",
        "",
        {
            "model": "claude-haiku-5-5",
            "max_tokens": 200,
            "system": "Be brief.",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Name a prime."}]}],
            "stream": False,
            "thinking": {"type": "adaptive", "display": "summarized"},
            "output_config": {"effort": "low"},
        },
    ),
    "gemini": (
        "gemini-4-argon",
        "",
        {
            "contents": [{"role": "user", "parts": [{"text": "Name a prime."}]}],
            "systemInstruction": {"role": "user", "parts": [{"text": "Be brief."}]},
            "generationConfig": {
                "maxOutputTokens": 200,
                "thinkingConfig": {"thinkingLevel": "low", "includeThoughts": True},
            },
        },
    ),
}


@pytest.mark.anyio
@pytest.mark.parametrize("provider", list(EXACT))
async def test_every_wire_gets_its_exact_batch_file_from_the_calls_body_builder(
    sim: Simulator, provider: str
) -> None:
    model, url, body = EXACT[provider]
    recorder = Recorder()
    async with (
        httpx.AsyncClient(event_hooks={"request": [recorder]}) as http,
        Client([_source(sim, provider, model)], http_client=http) as client,
    ):
        request = client.request(PRIME, reasoning_effort="low", max_tokens=200)
        await client.batch({"prime": request}, name="primes")
        batched = list(recorder.sent)
        recorder.sent.clear()
        await client.complete(PRIME, reasoning_effort="low", max_tokens=200)
    called = recorder.json(0)
    root = f"/{provider}/v1"
    if provider.startswith("openai"):
        (upload, create) = batched
        assert (upload[0], upload[1]) == ("POST", f"{root}/files")
        lines = _upload_lines(upload[2])
        assert lines == [{"custom_id": "prime", "method": "POST", "url": url, "body": body}]
        assert (create[0], create[1]) == ("POST", f"{root}/batches")
        created = json.loads(create[2])
        assert created == {
            "input_file_id": created["input_file_id"],
            "endpoint": url,
            "completion_window": "24h",
            "metadata": {"name": "primes"},
        }
        assert created["input_file_id"].startswith("file-")
        assert check_request(openai_batch_params.BatchCreateParams, created) == []
        if provider == "openai":
            params = openai_chat_params.CompletionCreateParamsNonStreaming
            assert check_request(params, lines[0]["body"]) == []
    elif provider == "anthropic":
        ((method, path, sent),) = batched
        assert (method, path) == ("POST", f"{root}/messages/batches")
        assert json.loads(sent) == {"requests": [{"custom_id": "prime", "params": body}]}
        assert check_request(anthropic_batch_params.BatchCreateParams, json.loads(sent)) == []
    else:
        ((method, path, sent),) = batched
        assert (method, path) == ("POST", f"{root}/models/{model}:batchGenerateContent")
        assert json.loads(sent) == {
            "batch": {
                "displayName": "primes",
                "inputConfig": {
                    "requests": {"requests": [{"request": body, "metadata": {"key": "prime"}}]}
                },
            }
        }
    # The same body a call sends (the batch line's body, from the same builder).
    assert called == body


# ---------------------------------------------------------------- lifecycle, on every wire


PROVIDERS = [
    ("openai", "gpt-5.5"),
    ("anthropic", "claude-haiku-5-5"),
    ("gemini", "gemini-4-argon"),
]
GENAI_PROVIDER = {"openai": "openai", "anthropic": "anthropic", "gemini": "google"}


def _questions(client: Client, count: int, **options: Any) -> dict[str, Any]:
    return {
        f"q{i:04d}": client.request(
            [{"role": "user", "content": f"Question {i}: why is the sky blue?"}],
            reasoning_effort="low",
            max_tokens=300,
            **options,
        )
        for i in range(count)
    }


@pytest.mark.anyio
@pytest.mark.parametrize(("provider", "model"), PROVIDERS)
async def test_a_thousand_requests_survive_a_restart_and_come_back_priced_at_batch_rates(
    sim: Simulator, clock: Clock, tmp_path: Path, provider: str, model: str
) -> None:
    budgets = LocalBudgets(clock=lambda: clock.now)
    budget = Budget(100.0, name=f"batch-{provider}")
    path = tmp_path / "job.json"
    async with Client(
        [_source(sim, provider, model)], budgets=[budget], budget_store=budgets
    ) as one:
        requests = _questions(one, 1000)
        job = await one.batch(requests)
        first = await job.poll()
        job.save(path)
        (held,) = await budgets.peek([budget.line("all")])
    assert first.done is False
    assert first.total == 1000
    worst = sum(item["worst"] for item in json.loads(path.read_text())["items"])
    assert held.spent == worst > 0
    # "Another process": a new client with the same source and budget store, the job file.
    clock.now = START + 1800.0  # half-way through running
    async with Client(
        [_source(sim, provider, model)], budgets=[budget], budget_store=budgets
    ) as two:
        resumed = two.resume_batch(path)
        assert resumed.custom_ids == tuple(requests)
        half = await resumed.poll()
        assert half.state == "in_progress"
        clock.now = START + TIMING.validating + TIMING.running + TIMING.finalizing
        results = [pair async for pair in resumed.results(every=0.01)]
        (after,) = await budgets.peek([budget.line("all")])
    assert [cid for cid, _ in results] == list(requests)
    total = 0
    for cid, response in results:
        assert isinstance(response, Response), (cid, response)
        assert response.service_tier == "batch"
        assert (response.requested_effort, response.applied_effort) == (Effort.LOW, Effort.LOW)
        assert response.cost is not None
        charged = _batch_price(response, GENAI_PROVIDER[provider])
        assert response.cost.total == pytest.approx(charged / 1e9, abs=1e-9)
        total += charged
        assert response.message.metadata is not None
        assert response.message.metadata.provider == provider
    # The reservation was corrected, request by request, to what the batch cost.
    assert after.spent == total


@pytest.mark.anyio
@pytest.mark.parametrize(("provider", "model"), PROVIDERS)
async def test_the_lifecycle_is_polled_as_each_provider_reports_it(
    sim: Simulator, clock: Clock, provider: str, model: str
) -> None:
    async with Client([_source(sim, provider, model)]) as client:
        job = await client.batch(_questions(client, 10))
        states = []
        for moment in (0.0, 30.0, 60.0 + 1800.0, 60.0 + 3600.0 + 30.0, 60.0 + 3600.0 + 61.0):
            clock.now = START + moment
            states.append(await job.poll())
    seen = [(s.state, s.done) for s in states]
    if provider == "openai":
        assert seen == [
            ("validating", False),
            ("validating", False),
            ("in_progress", False),
            ("finalizing", False),
            ("completed", True),
        ]
        # Counts grow as requests run: half of them half-way.
        assert [s.succeeded for s in states] == [0, 0, 5, 10, 10]
    elif provider == "anthropic":
        assert seen == [("in_progress", False)] * 4 + [("completed", True)]
        assert (states[-1].succeeded, states[-1].failed, states[-1].expired) == (10, 0, 0)
    else:
        assert seen == [
            ("pending", False),
            ("pending", False),
            ("in_progress", False),
            ("in_progress", False),
            ("completed", True),
        ]
        assert states[2].succeeded == 5


@pytest.mark.anyio
@pytest.mark.parametrize(("provider", "model"), PROVIDERS)
async def test_an_expired_batch_keeps_what_ran_and_the_rest_never_ran(
    sim: Simulator, clock: Clock, provider: str, model: str
) -> None:
    # A window that ends half-way through running: the first half answered, the rest expired.
    sim.settings.batch_timing = BatchTiming(validating=0.0, running=100.0, window=50.0)
    async with Client([_source(sim, provider, model)]) as client:
        job = await client.batch(_questions(client, 10))
        clock.now = START + 60.0
        results = await job.collect(every=0.01)
        status = await job.poll()
    assert status.state == "expired"
    kinds = [type(r).__name__ for r in results.values()]
    assert kinds == ["Response"] * 5 + ["BatchItemNotRunError"] * 5
    error = results["q0009"]
    assert isinstance(error, BatchItemNotRunError)
    assert (error.reason, error.custom_id, error.error_type) == (
        "expired",
        "q0009",
        "batch_expired",
    )


@pytest.mark.anyio
@pytest.mark.parametrize(("provider", "model"), PROVIDERS)
async def test_a_cancelled_batch_keeps_what_ran(
    sim: Simulator, clock: Clock, provider: str, model: str
) -> None:
    sim.settings.batch_timing = BatchTiming(validating=0.0, running=100.0, finalizing=10.0)
    async with Client([_source(sim, provider, model)]) as client:
        job = await client.batch(_questions(client, 10))
        clock.now = START + 30.0  # three of ten have run
        cancelling = await job.cancel()
        clock.now = START + 50.0
        results = await job.collect(every=0.01)
    assert cancelling.state in ("cancelling", "in_progress")
    kinds = [type(r).__name__ for r in results.values()]
    assert kinds == ["Response"] * 3 + ["BatchItemNotRunError"] * 7
    error = results["q0003"]
    assert isinstance(error, BatchItemNotRunError)
    assert (error.reason, error.error_type) == ("cancelled", "batch_cancelled")


PARTIAL: dict[str, tuple[str, dict[str, Any], type[Exception]]] = {
    # gpt-5.5 takes no "max" tier: OpenAI's 400 names reasoning_effort.
    "openai": ("gpt-5.5", {"reasoning_effort": "max"}, ThinkingUnsupportedError),
    # Both Gemini thinking fields at once: 400 INVALID_ARGUMENT.
    "gemini": (
        "gemini-4-argon",
        {"generationConfig": {"thinkingConfig": {"thinkingBudget": 1024}}},
        RequestRejectedError,
    ),
}


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
async def test_a_request_the_provider_refuses_is_a_typed_error_among_answers(
    sim: Simulator, clock: Clock, provider: str
) -> None:
    async with Client([_source(sim, provider, dict(PROVIDERS)[provider])]) as client:
        requests = _questions(client, 3)
        if provider == "anthropic":
            # A thinking block whose signature is not the API's: 400 invalid_request_error.
            forged = [
                {"role": "user", "content": "Hi"},
                {
                    "role": "assistant",
                    "content": "Hello",
                    "reasoning_items": [
                        {"type": "thinking", "thinking": "x", "signature": "forged"},
                        {"type": "text", "text": "Hello"},
                    ],
                    "reasoning_format": "anthropic",
                },
                {"role": "user", "content": "Again?"},
            ]
            requests["q0001"] = client.request(forged, reasoning_effort="low", max_tokens=300)
            expected: type[Exception] = RequestRejectedError
        else:
            _, extra, expected = PARTIAL[provider]
            requests["q0001"] = client.request(
                [{"role": "user", "content": "Question 1?"}],
                reasoning_effort="low",
                max_tokens=300,
                extra_body=extra,
            )
        job = await client.batch(requests)
        clock.now = START + 10_000.0
        results = await job.collect(every=0.01)
        status = await job.poll()
    assert isinstance(results["q0000"], Response)
    assert isinstance(results["q0002"], Response)
    error = results["q0001"]
    assert isinstance(error, expected), error
    assert error.provider == provider
    assert status.state == "completed"
    assert status.failed == 1


@pytest.mark.anyio
async def test_structured_output_is_parsed_into_the_model_after_a_restart(
    sim: Simulator, clock: Clock, tmp_path: Path
) -> None:
    path = tmp_path / "structured.json"
    async with Client([_source(sim, "openai", "gpt-5.5")]) as one:
        request = one.request(
            [{"role": "user", "content": "Answer in JSON."}], response_format=Answer, max_tokens=300
        )
        (await one.batch([request])).save(path)
    saved = json.loads(path.read_text())
    assert saved["items"][0]["format"]["class"] == "tests.test_batches:Answer"
    clock.now = START + 10_000.0
    async with Client([_source(sim, "openai", "gpt-5.5")]) as two:
        job = two.resume_batch(path)
        ((cid, result),) = [pair async for pair in job.results(every=0.01)]
    assert cid == "0"
    assert isinstance(result, Response)
    assert isinstance(result.parsed, Answer)


@pytest.mark.anyio
async def test_an_answer_that_does_not_fit_its_format_is_its_error(
    sim: Simulator, clock: Clock
) -> None:
    sim.settings.structured_output = "invalid"
    try:
        async with Client([_source(sim, "anthropic", "claude-haiku-5-5")]) as client:
            request = client.request(
                [{"role": "user", "content": "Answer."}], response_format=Answer, max_tokens=300
            )
            job = await client.batch({"a": request})
            clock.now = START + 10_000.0
            result = (await job.collect(every=0.01))["a"]
    finally:
        sim.settings.structured_output = "valid"
    assert isinstance(result, OutputValidationError)
    assert result.response is not None
    assert result.response.service_tier == "batch"


# ---------------------------------------------------------------- budgets


@pytest.mark.anyio
async def test_a_budget_that_cannot_afford_the_batch_refuses_it_whole(
    sim: Simulator, clock: Clock
) -> None:
    budgets = LocalBudgets(clock=lambda: clock.now)
    budget = Budget(0.01, name="small")
    async with Client(
        [_source(sim, "openai", "gpt-5.5")], budgets=[budget], budget_store=budgets
    ) as client:
        with pytest.raises(BudgetExceededError, match="the batch was not submitted") as caught:
            await client.batch(_questions(client, 100))
        (tally,) = await budgets.peek([budget.line("all")])
    assert tally.spent == 0
    assert caught.value.needed is not None
    assert caught.value.needed > 0.01
    assert sim.settings.batch_store is None  # nothing reached the provider


@pytest.mark.anyio
async def test_requests_that_never_ran_give_their_reservation_back(
    sim: Simulator, clock: Clock
) -> None:
    budgets = LocalBudgets(clock=lambda: clock.now)
    budget = Budget(10.0, name="give-back")
    sim.settings.batch_timing = BatchTiming(validating=0.0, running=100.0, finalizing=10.0)
    async with Client(
        [_source(sim, "anthropic", "claude-haiku-5-5")], budgets=[budget], budget_store=budgets
    ) as client:
        job = await client.batch(_questions(client, 10))
        clock.now = START + 50.0
        await job.cancel()
        clock.now = START + 70.0
        results = await job.collect(every=0.01)
        (tally,) = await budgets.peek([budget.line("all")])
    ran = [r for r in results.values() if isinstance(r, Response)]
    assert len(ran) == 5
    assert tally.spent == sum(_batch_price(r, "anthropic") for r in ran)


# ---------------------------------------------------------------- the providers' shapes


@pytest.mark.anyio
@pytest.mark.parametrize(("provider", "model"), PROVIDERS)
async def test_the_simulated_batch_objects_fit_the_sdks(
    sim: Simulator, clock: Clock, provider: str, model: str
) -> None:
    recorder: list[tuple[str, bytes]] = []

    async def keep(response: httpx.Response) -> None:
        await response.aread()
        recorder.append((response.request.url.path, response.content))

    async with (
        httpx.AsyncClient(event_hooks={"response": [keep]}) as http,
        Client([_source(sim, provider, model)], http_client=http) as client,
    ):
        job = await client.batch(_questions(client, 2))
        clock.now = START + 10_000.0
        await job.collect(every=0.01)
    bodies = [(path, body) for path, body in recorder]
    problems: list[str] = []
    for path, body in bodies:
        if provider == "openai":
            if path.endswith("/content"):
                for line in body.splitlines():
                    answer = json.loads(line)["response"]["body"]
                    problems += check_response(openai_chat.ChatCompletion, answer)
            elif "/files" in path:
                problems += check_response(openai_file.FileObject, json.loads(body))
            else:
                problems += check_response(openai_batch.Batch, json.loads(body))
        elif provider == "anthropic":
            if path.endswith("/results"):
                for line in body.splitlines():
                    problems += check_response(
                        anthropic_batches.MessageBatchIndividualResponse, json.loads(line)
                    )
            else:
                problems += check_response(anthropic_batches.MessageBatch, json.loads(body))
        else:
            raw = json.loads(body)
            parsed = genai_types.BatchJob._from_response(
                response=genai_batches._BatchJob_from_mldev(raw), kwargs={}
            )
            assert parsed.name == raw["name"]
            assert parsed.state is not None
            if raw.get("done"):
                assert parsed.dest is not None
                assert parsed.dest.inlined_responses is not None
                assert len(parsed.dest.inlined_responses) == 2
    assert problems == []


# ---------------------------------------------------------------- refusals before submitting


@pytest.mark.anyio
async def test_what_cannot_be_submitted_is_refused_before_anything_is_sent(
    sim: Simulator,
) -> None:
    async with Client(
        [_source(sim, "deepseek", "deepseek-v4-flash"), _source(sim, "openai", "gpt-5.5")]
    ) as client:
        request = client.request([{"role": "user", "content": "hi"}], max_tokens=100)
        with pytest.raises(ValueError, match="1 to 64 letters, digits"):
            await client.batch({"no spaces": request})
        with pytest.raises(ValueError, match="has no batch API"):
            await client.batch([request], source=0)
        refused: list[tuple[dict[str, Any], str]] = [
            (
                {"requests": [request], "source": "0"},
                "source must be a source index (an int from 0 to 1) or None for the first "
                "source with a batch API; got str '0'",
            ),
            (
                {"requests": [request], "source": True},
                "source must be a source index (an int from 0 to 1) or None for the first "
                "source with a batch API; got bool True",
            ),
            (
                {"requests": {5: request}},
                "batch request id 5 is a int: ids are str, 1 to 64 letters, digits, '_' or "
                "'-' (or pass a list for ids '0', '1', ...)",
            ),
            (
                {"requests": [request], "name": 5},
                "batch name must be a non-empty str (or None for polythink-<unix time>); got int 5",
            ),
            (
                {"requests": [request], "name": " "},
                "batch name must be a non-empty str (or None for polythink-<unix time>); got "
                "str ' '",
            ),
            (
                {"requests": [request], "name": "x" * 513},
                "batch name must be at most 512 characters (OpenAI's metadata value limit); "
                "got 513",
            ),
            (
                {"requests": [request], "name": "a\ud800"},
                "batch name holds a lone surrogate U+D800 at character 1: text must be valid "
                "Unicode (UTF-8 encodable); it usually comes from bytes decoded with "
                "errors='surrogateescape' or a cut UTF-16 pair",
            ),
        ]
        for arguments, words in refused:
            with pytest.raises(InvalidInputError) as caught:
                await client.batch(**arguments)
            assert type(caught.value) is InvalidInputError
            assert str(caught.value) == words
        with pytest.raises(ValueError, match=r"build each with client\.request"):
            await client.batch([{"role": "user", "content": "hi"}])  # type: ignore[list-item]
        bad = client.request([{"role": "user", "content": "hi"}], reasoning_effort="max")
        # gpt-5.5 has no "max" tier: under the error policy the batch is refused, naming it.
        strict = Client([_source(sim, "openai", "gpt-5.5", effort_fallback="error")])
        async with strict:
            with pytest.raises(ThinkingUnsupportedError, match=r"batch request '1'"):
                await strict.batch([request, bad])
        # The first source with a batch API is chosen without ``source=``.
        job = await client.batch([request])
    assert isinstance(job, BatchJob)
    assert (job.provider, job.source_index) == ("openai", 1)
    assert sim.settings.batch_store is not None
    assert len(sim.settings.batch_store.batches) == 1


def test_a_saved_job_needs_its_source() -> None:
    with pytest.raises(ValueError, match="not a saved polythink batch job"):
        Client([Source("openai", "gpt-5.5", api_key="k")]).resume_batch({"version": 0})


def test_amounts_are_whole_nanodollars() -> None:
    assert nano(Decimal("0.0000000011")) == 2


@pytest.mark.anyio
async def test_batch_answers_are_counted_in_the_call_and_cost_metrics(
    sim: Simulator, clock: Clock
) -> None:
    from polythink.middleware import semconv
    from tests.test_telemetry import Otel

    otel = Otel()
    async with Client(
        [_source(sim, "gemini", "gemini-4-argon")], meter_provider=otel.meter_provider
    ) as client:
        job = await client.batch(_questions(client, 4))
        clock.now = START + 10_000.0
        results = await job.collect(every=0.01)
    (cost,) = otel.points(semconv.POLYTHINK_CLIENT_COST)
    (calls,) = otel.points(semconv.POLYTHINK_CLIENT_CALLS)
    assert cost.attributes is not None
    assert cost.attributes[semconv.POLYTHINK_SERVED_SERVICE_TIER] == "batch"
    spent = [r.cost.total for r in results.values() if isinstance(r, Response) and r.cost]
    assert len(spent) == 4
    assert cost.value == pytest.approx(sum(spent), rel=1e-12)
    assert calls.value == 4


@pytest.mark.anyio
async def test_a_batch_whose_file_fails_validation_never_runs_any_request(
    sim: Simulator, clock: Clock
) -> None:
    # A file with a duplicate custom_id, as another tool might upload: OpenAI's batch fails
    # validation (status "failed", errors.data), and a job over it yields "never ran".
    base = sim.base_url("openai")
    line = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {}}
    data = (json.dumps(line) + "\n" + json.dumps(line) + "\n").encode()
    async with httpx.AsyncClient() as http:
        upload = await http.post(
            f"{base}/files",
            files={"file": ("bad.jsonl", data, "application/jsonl")},
            data={"purpose": "batch"},
        )
        assert check_response(openai_file.FileObject, upload.json()) == []
        created = await http.post(
            f"{base}/batches",
            json={
                "input_file_id": upload.json()["id"],
                "endpoint": "/v1/chat/completions",
                "completion_window": "24h",
            },
        )
        batch_id = created.json()["id"]
        clock.now = START + 120.0
        failed = (await http.get(f"{base}/batches/{batch_id}")).json()
    assert check_response(openai_batch.Batch, failed) == []
    assert failed["status"] == "failed"
    assert failed["errors"]["data"][0]["code"] == "duplicate_custom_id"
    saved = {
        "version": 1,
        "wire": "openai",
        "provider": "openai",
        "model": "gpt-5.5",
        "endpoint": base,
        "endpoint_path": "/v1/chat/completions",
        "submitted_at": START,
        "id": batch_id,
        "items": [
            {
                "id": "a",
                "requested": None,
                "applied": None,
                "warnings": [],
                "notes": [],
                "overridden": [],
                "hints": {},
                "format": None,
                "worst": 0,
                "hold": None,
            }
        ],
    }
    async with Client([_source(sim, "openai", "gpt-5.5")]) as client:
        job = client.resume_batch(saved)
        status = await job.poll()
        ((cid, result),) = [pair async for pair in job.results(every=0.01)]
    assert (status.state, status.done) == ("failed", True)
    assert status.errors == ("Each line needs a unique custom_id.",)
    assert cid == "a"
    assert isinstance(result, BatchItemNotRunError)
    assert (result.reason, result.error_type) == ("failed", "batch_failed")
    assert "Each line needs a unique custom_id." in result.message
