"""The clouds' wire, checked against the official types: the conformance matrix's calls
(``tests/test_conformance.py``: every tier, tool choice, tool loop, cache marker, image,
history, structured output and sampling case) sent to each simulated cloud, the bodies and
answers checked against the Anthropic SDK's types (InvokeModel and rawPredict, once their cloud
fields are put back as the Messages API has them), botocore's ``bedrock-runtime`` service model
(Converse, with botocore's own parameter validator), google-genai's (Gemini on Vertex) and the
openai SDK's (Azure)."""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal, Required
from urllib.parse import unquote

import anyio
import httpx
import pytest
from typing_extensions import TypedDict

from polythink import Client, Source
from polythink.errors import PolythinkError
from polythink.providers import PROVIDERS
from polythink.simulator import Settings, Simulator
from polythink.simulator.clouds import (
    AWS_ACCESS_KEY_ID,
    AWS_SECRET_ACCESS_KEY,
    AZURE_API_KEY,
    GOOGLE_TOKEN_PREFIX,
)
from polythink.transports.eventstream import EventStreamDecoder
from tests.sdk_types import Extensions, check_request, check_response
from tests.test_conformance import (
    ANTHROPIC_VERSION_FIELDS,
    Exchange,
    Recorder,
    _calls,
    _chat_answer,
    _chat_request,
    _gemini_answer,
    _gemini_request,
    _models,
    _problems_by,
    _responses_answer,
    _responses_request,
    _run,
    anthropic_params,
    anthropic_types,
)
from tests.test_conformance import openai_chat as openai_chat_types

botocore_session = pytest.importorskip("botocore.session")
botocore_validate = pytest.importorskip("botocore.validate")
credentials_module = pytest.importorskip("botocore.credentials")

CLOUDS = tuple(p for p, profile in PROVIDERS.items() if profile.cloud is not None)


def _cloud_models() -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Per cloud provider, its sources' models (in the id forms the cloud takes) and
    options: the same registry models the conformance matrix picks for the vendors."""
    chosen = _models()
    aws = {
        "region": "us-east-1",
        "credentials": credentials_module.Credentials(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY),
    }
    google = {"project": "conformance", "credentials": lambda: GOOGLE_TOKEN_PREFIX + "matrix"}
    claude = chosen["anthropic"]
    return {
        "bedrock": [(f"us.anthropic.{m}", aws) for m in claude],
        "bedrock-converse": [
            ("openai.gpt-oss-120b-1:0", aws),
            (f"global.anthropic.{claude[-1]}", aws),
        ],
        "vertex": [(m, google) for m in chosen["gemini"]],
        "vertex-anthropic": [(m, google) for m in claude],
        "azure": [(m, {"api_key": AZURE_API_KEY, "base_model": m}) for m in chosen["openai"]],
        "azure-responses": [
            (m, {"api_key": AZURE_API_KEY, "base_model": m}) for m in chosen["openai"]
        ],
    }


def _wire(exchange: Exchange) -> str:
    path = exchange.path
    if path.endswith(("/invoke", "/invoke-with-response-stream")):
        return "bedrock"
    if path.endswith(("/converse", "/converse-stream")):
        return "bedrock_converse"
    if path.endswith((":rawPredict", ":streamRawPredict")):
        return "vertex_anthropic"
    return exchange.wire


def _frames(exchange: Exchange) -> list[tuple[str, Any]]:
    decoder = EventStreamDecoder()
    return [(kind, json.loads(data)) for kind, data in decoder.feed(bytes(exchange.raw))]


def _streamed(exchange: Exchange) -> bool:
    return exchange.streamed or "eventstream" in exchange.content_type


async def _run_clouds(sim: Simulator) -> tuple[list[Exchange], list[str], list[str]]:
    recorder = Recorder()
    refused: list[str] = []
    failed: list[str] = []
    async with httpx.AsyncClient(transport=recorder) as http:
        for provider, models in _cloud_models().items():
            for model, options in models:
                source = Source(provider, model, base_url=sim.base_url(provider), **options)
                async with Client([source], http_client=http) as client:
                    for call in _calls(provider):
                        for stream in call.streams:
                            sent = len(recorder.exchanges)
                            try:
                                await _run(client, call, stream)
                            except PolythinkError as exc:
                                where = f"{provider} {model} {call.what} {stream=}: {exc}"
                                (failed if len(recorder.exchanges) > sent else refused).append(
                                    where
                                )
    return recorder.exchanges, refused, failed


@pytest.fixture(scope="module")
def matrix() -> Iterator[tuple[list[Exchange], list[str], list[str]]]:
    with Simulator(Settings(answer_words=3)) as sim:
        yield anyio.run(_run_clouds, sim)


def _messages_request(exchange: Exchange, version: str) -> list[str]:
    """An InvokeModel or rawPredict body as the Messages API body it stands for."""
    body = dict(exchange.body)
    out = []
    if body.pop("anthropic_version", None) != version:
        out.append(f"$.anthropic_version is not {version!r}")
    if "model" in body:
        out.append("$.model is in the body; the cloud takes it in the URL")
    betas = body.pop("anthropic_beta", [])
    if not isinstance(betas, list):
        out.append("$.anthropic_beta is not a list")
    stream = exchange.path.endswith(("stream", ":streamRawPredict"))
    if exchange.path.endswith("-with-response-stream") and "stream" in body:
        out.append("$.stream is in an InvokeModel body; the path chooses")
    body.pop("stream", None)
    model = unquote(exchange.path.rsplit("/model/", 1)[-1].rsplit("/", 1)[0])
    if ":" in exchange.path.rsplit("/", 1)[-1]:
        model = exchange.path.rsplit("/models/", 1)[-1].split(":", 1)[0]
    params = (
        anthropic_params.MessageCreateParamsStreaming
        if stream
        else anthropic_params.MessageCreateParamsNonStreaming
    )
    full = {"model": model, **body, **({"stream": True} if stream else {})}
    return out + check_request(params, full, ANTHROPIC_VERSION_FIELDS["2023-06-01"])


@functools.cache
def _service() -> Any:
    """botocore's ``bedrock-runtime`` service model (read once)."""
    return botocore_session.get_session().get_service_model("bedrock-runtime")


def _converse_request(exchange: Exchange) -> list[str]:
    service = _service()
    stream = exchange.path.endswith("-stream")
    shape = service.operation_model("ConverseStream" if stream else "Converse").input_shape
    model = unquote(exchange.path.rsplit("/model/", 1)[-1].rsplit("/", 1)[0])
    report = botocore_validate.ParamValidator().validate({"modelId": model, **exchange.body}, shape)
    return [report.generate_report()] if report.has_errors() else []


def _converse_answer(exchange: Exchange) -> list[str]:
    if exchange.status != 200:
        return []
    service = _service()
    validator = botocore_validate.ParamValidator()
    if not _streamed(exchange):
        shape = service.operation_model("Converse").output_shape
        report = validator.validate(json.loads(bytes(exchange.raw)), shape)
        return [report.generate_report()] if report.has_errors() else []
    events = service.shape_for("ConverseStreamOutput")
    out = []
    for kind, payload in _frames(exchange):
        # "p" is the random-length padding Bedrock adds to every event (CLOUDS.md §1.7).
        fields = {k: v for k, v in payload.items() if k != "p"}
        report = validator.validate({kind: fields}, events)
        if report.has_errors():
            out.append(f"event {kind}: {report.generate_report()}")
    return out


class _Ping(TypedDict):
    type: Required[Literal["ping"]]


class _VertexEvent(TypedDict, total=False):
    """Vertex's own stream event (usage), which the Anthropic SDK's union leaves out
    (vercel/ai#13576)."""

    type: Required[Literal["vertex_event"]]
    usage: dict[str, Any]


def _messages_answer(exchange: Exchange) -> list[str]:
    if exchange.status != 200:
        return []
    if not _streamed(exchange):
        return check_response(anthropic_types.Message, json.loads(bytes(exchange.raw)))
    if exchange.streamed:
        events = [data for _, data in exchange.answers()]
    else:
        events = []
        for kind, payload in _frames(exchange):
            assert kind == "chunk", kind
            event = json.loads(base64.b64decode(payload["bytes"]))
            event.pop("amazon-bedrock-invocationMetrics", None)
            events.append(event)
    model = anthropic_types.RawMessageStreamEvent | _Ping | _VertexEvent
    out = []
    for event in events:
        out += [f"event {event.get('type')}: {p}" for p in check_response(model, event)]
    return out


REQUESTS: dict[str, Callable[[Exchange], list[str]]] = {
    "bedrock": lambda e: _messages_request(e, "bedrock-2023-05-31"),
    "vertex_anthropic": lambda e: _messages_request(e, "vertex-2023-10-16"),
    "bedrock_converse": _converse_request,
    "gemini": _gemini_request,
    "openai_chat": _chat_request,
    "openai_responses": _responses_request,
}
ANSWERS: dict[str, Callable[[Exchange], list[str]]] = {
    "bedrock": _messages_answer,
    "vertex_anthropic": _messages_answer,
    "bedrock_converse": _converse_answer,
    "gemini": _gemini_answer,
    "openai_chat": _chat_answer,
    "openai_responses": _responses_answer,
}


_CHAT = openai_chat_types.ChatCompletion
_CHOICE = openai_chat_types.chat_completion.Choice
AZURE_ANSWER_EXTENSIONS: Extensions = {
    # Azure's content-filter annotations (learn.microsoft.com azure/ai-services/openai/concepts/
    # content-filter, CLOUDS.md §3.1 AZ-CF).
    _CHAT: {"prompt_filter_results": list[dict[str, Any]]},
    _CHOICE: {"content_filter_results": dict[str, Any]},
}


def _azure_chat_answer(exchange: Exchange) -> list[str]:
    if exchange.status != 200:
        return []
    if exchange.streamed:
        return _chat_answer(exchange)
    return check_response(_CHAT, json.loads(bytes(exchange.raw)), AZURE_ANSWER_EXTENSIONS)


def _as_openai(exchange: Exchange) -> Exchange:
    """An Azure exchange checked as OpenAI's (its bodies and answers are OpenAI's, with the
    deployment as the model)."""
    return Exchange("openai", exchange.path, exchange.headers, exchange.body, exchange.status,
                    exchange.content_type, exchange.raw)  # fmt: skip


@pytest.mark.parametrize("wire", sorted(REQUESTS))
def test_cloud_request_bodies(matrix: tuple[list[Exchange], Any, Any], wire: str) -> None:
    exchanges = [
        _as_openai(e) if e.provider.startswith("azure") else e
        for e in matrix[0]
        if _wire(e) == wire
    ]
    assert exchanges, wire
    assert _problems_by(REQUESTS[wire], exchanges) == []


@pytest.mark.parametrize("wire", sorted(ANSWERS))
def test_simulated_cloud_answers(matrix: tuple[list[Exchange], Any, Any], wire: str) -> None:
    exchanges = [
        _as_openai(e) if e.provider.startswith("azure") else e
        for e in matrix[0]
        if _wire(e) == wire
    ]
    check = _azure_chat_answer if wire == "openai_chat" else ANSWERS[wire]
    assert _problems_by(check, exchanges) == []


def test_the_cloud_matrix_covers_every_cloud_and_carries_reasoning_back(
    matrix: tuple[list[Exchange], list[str], list[str]],
) -> None:
    exchanges, _, failed = matrix
    assert failed == []
    seen = {(e.provider, _streamed(e)) for e in exchanges}
    assert seen == {(p, s) for p in CLOUDS for s in (False, True)}

    def sent_back(provider: str, found: Callable[[Any], bool]) -> bool:
        return any(found(e.body) for e in exchanges if e.provider == provider)

    def turns(body: Any, key: str) -> list[Any]:
        return [m for m in body.get(key, ()) if isinstance(m, Mapping)]

    def signed_thinking(body: Any) -> bool:
        return any(
            isinstance(m["content"], list) and m["content"][0].get("signature")
            for m in turns(body, "messages")
            if m["role"] == "assistant"
        )

    assert sent_back("bedrock", signed_thinking)
    assert sent_back("vertex-anthropic", signed_thinking)
    assert sent_back(
        "bedrock-converse",
        lambda b: any(
            block.get("reasoningContent", {}).get("reasoningText", {}).get("signature")
            for m in turns(b, "messages")
            if m["role"] == "assistant"
            for block in m["content"]
        ),
    )
    assert sent_back(
        "vertex",
        lambda b: any(p.get("thoughtSignature") for c in turns(b, "contents") for p in c["parts"]),
    )
    assert sent_back(
        "azure-responses",
        lambda b: any(
            i.get("type") == "reasoning" and i.get("encrypted_content") for i in turns(b, "input")
        ),
    )
    # Betas in the body on Bedrock, never as a header there.
    assert not any("anthropic-beta" in e.headers for e in exchanges if _wire(e) == "bedrock")
    # Every Bedrock request was signed (the simulator verified each signature).
    assert all(
        e.headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={AWS_ACCESS_KEY_ID}/")
        for e in exchanges
        if e.provider.startswith("bedrock")
    )
