"""The gateway's pure parts: the reasoning envelope, what a body sent as written keeps and
changes, effort read from a budget, the configuration file, the route table, the shared
limits, the cache key of a call carrying its own body, and the command line."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import httpx
import pytest

from polythink import Source
from polythink.backends.local import LocalLimits, MonotonicClock, ProcessLimits
from polythink.cache_key import cache_key
from polythink.cli import main
from polythink.errors import (
    BudgetExceededError,
    ContextWindowExceededError,
    RateLimitedError,
    ThinkingUnsupportedError,
    TransientError,
)
from polythink.providers import get_provider
from polythink.reasoning.capabilities import get_capability
from polythink.reasoning.resolve import effort_for_budget, resolve
from polythink.serve.chat import ChatDoor
from polythink.serve.config import load_config, split_model
from polythink.serve.envelope import open_envelope, seal
from polythink.serve.exchange import classify, sse_frame
from polythink.serve.messages import MessagesDoor
from polythink.serve.responses import ResponsesDoor
from polythink.serve.routing import Router, source_for
from polythink.transports.anthropic import AnthropicTransport
from polythink.transports.native import keeps_reasoning, native_body
from polythink.types import Effort, Message, NativeBody, Request, Response, ToolCall, Usage

ANTHROPIC = get_provider("anthropic")
DEEPSEEK = get_provider("deepseek")


def _native(body: dict[str, Any], **fields: Any) -> NativeBody:
    return NativeBody(wire="anthropic", body=body, key="k", **fields)


def _resolved(native: NativeBody, effort: Effort | None, model: str, **fields: Any) -> Request:
    provider = "anthropic" if native.wire == "anthropic" else "deepseek"
    resolution = resolve(effort, provider=provider, model=model)
    return Request(
        messages=(Message(role="user", content="hi"),),
        reasoning_effort=effort,
        resolution=resolution,
        native=native,
        **fields,
    )


def test_the_envelope_restores_a_turn_exactly() -> None:
    items = (
        {"type": "thinking", "thinking": "é\nhmm", "signature": "sig/+=="},
        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1.5}},
    )
    message = Message(
        role="assistant",
        content=None,
        tool_calls=(ToolCall(id="toolu_1", name="f", arguments='{"a":1.5}'),),
        reasoning="é\nhmm",
        reasoning_items=items,
        reasoning_format="anthropic",
    )
    sealed = open_envelope(seal(message, provider="anthropic", model="claude-opus-4-5"))
    assert sealed is not None
    assert sealed.reasoning_items == items
    assert (sealed.reasoning_format, sealed.reasoning) == ("anthropic", "é\nhmm")
    assert (sealed.provider, sealed.model) == ("anthropic", "claude-opus-4-5")
    assert seal(Message(role="assistant", content="no reasoning")) is None
    for foreign in ("sim1.abc", "pt1.!!!", "pt1." + "A" * 10, None, 7):
        assert open_envelope(foreign) is None


def test_effort_for_budget_is_the_nearest_tier() -> None:
    assert effort_for_budget(0) is Effort.NONE
    assert effort_for_budget(1024) is Effort.MINIMAL
    assert effort_for_budget(5000) is Effort.MEDIUM  # log-nearer 8192 than 2048
    assert effort_for_budget(16000) is Effort.HIGH
    assert effort_for_budget(10**6) is Effort.MAX


def test_a_body_goes_as_written_when_the_model_takes_its_reasoning() -> None:
    body = {
        "model": "alias",
        "max_tokens": 500,
        "thinking": {
            "type": "adaptive",
            "block_binding": {"prefix_mismatch_behavior": "drop_block"},
        },
        "output_config": {"effort": "high", "format": {"type": "json_schema", "schema": {}}},
        "unknown_field": [1],
    }
    native = _native(
        body,
        dialect="anthropic",
        effort=Effort.HIGH,
        style="adaptive",
        reasoning_paths=(("thinking", "type"), ("output_config", "effort")),
        max_tokens_key="max_tokens",
    )
    request = _resolved(native, Effort.HIGH, "claude-sonnet-4-6", max_tokens=500)
    capability = get_capability("claude-sonnet-4-6")
    assert keeps_reasoning(native, request, ANTHROPIC, capability)
    sent, notes = native_body(
        native, request, model="claude-sonnet-4-6", profile=ANTHROPIC, capability=capability
    )
    assert sent == {**body, "model": "claude-sonnet-4-6"}
    assert notes == []
    assert body["model"] == "alias"


def test_reasoning_a_model_does_not_take_is_rewritten_keeping_the_rest() -> None:
    body = {
        "model": "m",
        "max_tokens": 500,
        "thinking": {
            "type": "enabled",
            "budget_tokens": 16000,
            "block_binding": {"prefix_mismatch_behavior": "drop_block"},
        },
    }
    native = _native(
        body,
        dialect="anthropic",
        effort=Effort.HIGH,
        style="manual",
        reasoning_paths=(("thinking", "type"), ("thinking", "budget_tokens")),
        max_tokens_key="max_tokens",
    )
    # An adaptive model: manual thinking is refused there, so polythink spells it.
    request = _resolved(native, Effort.HIGH, "claude-sonnet-4-6", max_tokens=500)
    sent, notes = native_body(
        native,
        request,
        model="claude-sonnet-4-6",
        profile=ANTHROPIC,
        capability=get_capability("claude-sonnet-4-6"),
    )
    assert sent["thinking"] == {
        "type": "adaptive",
        "block_binding": {"prefix_mismatch_behavior": "drop_block"},
    }
    assert sent["output_config"] == {"effort": "high"}
    assert notes
    assert "reasoning fields rewritten" in notes[0]
    assert body["thinking"]["type"] == "enabled"


def test_a_chat_body_to_another_dialect_and_a_changed_ceiling() -> None:
    body = {"model": "m", "messages": [], "reasoning_effort": "high", "max_completion_tokens": 900}
    native = NativeBody(
        wire="openai_chat",
        body=body,
        dialect="effort",
        effort=Effort.HIGH,
        reasoning_paths=(("reasoning_effort",),),
        max_tokens_key="max_completion_tokens",
    )
    request = _resolved(native, Effort.HIGH, "deepseek-v4-pro", max_tokens=700, stream=True)
    sent, _ = native_body(
        native,
        request,
        model="deepseek-v4-pro",
        profile=DEEPSEEK,
        capability=get_capability("deepseek-v4-pro"),
    )
    assert sent["thinking"] == {"type": "enabled"}
    assert sent["reasoning_effort"] == "high"
    assert "max_completion_tokens" not in sent
    assert sent["max_tokens"] == 700
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}


def test_a_body_as_written_keeps_the_models_sampling_rules() -> None:
    """The caller's own body goes through the rules a built one does: refused before
    sending, or, under ``drop_params`` (the gateway's sources), dropped with a note; judged
    on the ``anthropic-version`` the caller sent (2026-10-21 has no sampling parameters)."""
    body = {
        "model": "m",
        "max_tokens": 20000,
        "temperature": 0,
        "top_k": 5,
        "thinking": {"type": "enabled", "budget_tokens": 8192},
        "messages": [{"role": "user", "content": "hi"}],
    }
    native = _native(
        body,
        dialect="anthropic",
        effort=effort_for_budget(8192),
        style="manual",
        reasoning_paths=(("thinking", "type"), ("thinking", "budget_tokens")),
        max_tokens_key="max_tokens",
        headers={"anthropic-version": "2023-06-01"},
    )
    request = _resolved(native, Effort.MEDIUM, "claude-haiku-4-5", max_tokens=20000)

    def transport(**fields: Any) -> AnthropicTransport:
        source = Source("anthropic", "claude-haiku-4-5", api_key="sk-ant-test-0123", **fields)
        return AnthropicTransport(
            source=source, index=0, profile=ANTHROPIC, client=httpx.AsyncClient(), api_key="k"
        )

    with pytest.raises(ThinkingUnsupportedError, match=r"rejects temperature, top_k while"):
        transport().body(request)
    dropping = transport(drop_params=True)
    expected = {key: value for key, value in body.items() if key not in ("temperature", "top_k")}
    assert dropping.body(request) == {**expected, "model": "claude-haiku-4-5"}
    plain = {"model": "m", "max_tokens": 10, "temperature": 0, "messages": body["messages"]}
    native = _native(plain, max_tokens_key="max_tokens", headers=native.headers)
    request = _resolved(native, None, "claude-haiku-4-5", max_tokens=10)
    assert dropping.body(request) == {**plain, "model": "claude-haiku-4-5"}
    unversioned = request.with_(native=dataclasses.replace(native, headers={}))
    assert "temperature" not in dropping.body(unversioned)


def test_native_headers_join_list_headers() -> None:
    source = Source(
        "anthropic",
        "claude-sonnet-4-6",
        api_key="sk-ant-test-0123456789",
        headers={"anthropic-beta": "files-api-2025-04-14,claude-code-20250219"},
    )
    transport = AnthropicTransport(
        source=source,
        index=0,
        profile=ANTHROPIC,
        client=httpx.AsyncClient(),
        api_key=source.api_key,
    )
    native = _native(
        {},
        headers={
            "anthropic-beta": "claude-code-20250219, context-1m",
            "anthropic-version": "2023-06-01",
        },
    )
    request = Request(messages=(Message(role="user", content="hi"),), native=native)
    headers = transport.native_headers(transport.headers, request)
    assert headers["anthropic-beta"] == "claude-code-20250219, context-1m,files-api-2025-04-14"
    assert headers["anthropic-version"] == "2023-06-01"
    assert headers["x-api-key"] == "sk-ant-test-0123456789"
    other = dataclasses.replace(native, wire="openai_chat")
    unchanged = transport.native_headers(transport.headers, request.with_(native=other))
    assert unchanged == transport.headers


def test_the_cache_key_counts_a_calls_own_body() -> None:
    sources = [Source("anthropic", "claude-sonnet-4-6", api_key="sk-ant-test-0123456789")]
    plain = Request(messages=(Message(role="user", content="hi"),))
    one = plain.with_(native=_native({"a": 1}, headers={"anthropic-beta": "x"}))
    keys = {
        cache_key(plain, sources),
        cache_key(one, sources),
        cache_key(one.with_(native=dataclasses.replace(one.native, key="other")), sources),
        cache_key(
            one.with_(native=dataclasses.replace(one.native, headers={"anthropic-beta": "y"})),
            sources,
        ),
    }
    assert len(keys) == 4


def test_process_limits_are_one_per_account() -> None:
    limits = ProcessLimits()
    clock = MonotonicClock()
    first = limits.for_source(
        "openai",
        "https://x/v1",
        "sk-a",
        rpm=10,
        tpm=None,
        max_concurrency=None,
        fallback=LocalLimits(10, None, None, clock),
    )
    again = limits.for_source(
        "openai",
        "https://x/v1",
        "sk-a",
        rpm=99,
        tpm=None,
        max_concurrency=None,
        fallback=LocalLimits(99, None, None, clock),
    )
    other = limits.for_source(
        "openai",
        "https://x/v1",
        "sk-b",
        rpm=10,
        tpm=None,
        max_concurrency=None,
        fallback=LocalLimits(10, None, None, clock),
    )
    assert again is first
    assert other is not first


def test_errors_classify_by_status_then_class() -> None:
    assert classify(RateLimitedError("x", status_code=429)) == (429, "rate_limit")
    assert classify(TransientError("x", status_code=200, error_type="overloaded_error")) == (
        529,
        "overloaded",
    )
    assert classify(TransientError("x", status_code=503)) == (503, "api_error")
    assert classify(ContextWindowExceededError("x", status_code=400)) == (400, "context_length")
    spent = BudgetExceededError(
        "x",
        budget="daily",
        scope="*",
        window="day",
        limit=5.0,
        spent=5.0,
        needed=0.1,
        resets_at=0.0,
    )
    assert classify(spent) == (402, "billing")


def test_sse_frames() -> None:
    assert sse_frame("message_stop", '{"type":"message_stop"}') == (
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    assert sse_frame("message", "a\nb") == b"data: a\ndata: b\n\n"


CONFIG = """
limits = "redis://127.0.0.1:1/0"

[[source]]
provider = "anthropic"
model = "claude-sonnet-4-6"
api_key = "sk-ant-test-0123456789"

[[source]]
provider = "deepseek"
model = "deepseek-v4-pro"
api_key = "sk-deepseek-test-0123456789"
reasoning_effort = "high"

[serve]
port = 4100
keepalive = 5

[[route]]
name = "smart"
aliases = ["claude-opus-4-7"]
sources = ["anthropic/claude-sonnet-4-6", "deepseek/deepseek-v4-pro"]
"""


def test_the_configuration_file(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(CONFIG)
    config = load_config(path)
    assert [s.model for s in config.sources] == ["claude-sonnet-4-6", "deepseek-v4-pro"]
    (route,) = config.routes
    assert (route.name, route.aliases) == ("smart", ("claude-opus-4-7",))
    assert (config.settings.port, config.settings.keepalive) == (4100, 5.0)
    assert config.client_options["limits"] == "redis://127.0.0.1:1/0"
    # The same file builds a client: the gateway's tables are left alone.
    from polythink.config import sources_from_toml

    assert len(sources_from_toml(path)) == 2
    path.write_text(CONFIG + '\n[[route]]\nname = "smart"\nsources = ["openai/gpt-5.5"]\n')
    with pytest.raises(ValueError, match="'smart' already names route #0"):
        load_config(path)
    path.write_text('[[route]]\nname = "x"\nsources = ["nowhere/model"]\n')
    with pytest.raises(ValueError, match="not provider/model-id with a known provider"):
        load_config(path)
    path.write_text("[serve]\nport = 70000\n")
    with pytest.raises(ValueError, match="port must be from 0 to 65535"):
        load_config(path)


def test_model_names_route_in_order(tmp_path: Path) -> None:
    assert split_model("openrouter/anthropic/claude-sonnet-4.5") == (
        "openrouter",
        "anthropic/claude-sonnet-4.5",
    )
    assert split_model("claude-sonnet-4-6") is None
    assert split_model("nowhere/x") is None
    configured = (
        Source("deepseek", "deepseek-v4-pro", api_key="sk-deepseek-test-0123456789", rpm=5),
    )
    assert source_for("deepseek/deepseek-v4-pro", configured) is configured[0]
    flash = source_for("deepseek/deepseek-v4-flash", configured)
    assert (flash.model, flash.rpm, flash.api_key) == (
        "deepseek-v4-flash",
        5,
        configured[0].api_key,
    )
    path = tmp_path / "gateway.toml"
    path.write_text(CONFIG.replace('limits = "redis://127.0.0.1:1/0"\n', ""))
    router = Router(load_config(path), http_client=httpx.AsyncClient())
    router.start()
    try:
        assert router.names() == [
            "smart",
            "claude-opus-4-7",
            "claude-sonnet-4-6",
            "deepseek-v4-pro",
        ]
        smart = router.find("claude-opus-4-7")
        assert smart is not None
        assert smart is router.find("smart")
        assert [s.provider for s in smart.sources] == ["anthropic", "deepseek"]
        assert smart.wires == {"anthropic", "openai_chat"}
        named = router.find("deepseek/deepseek-v4-flash")
        # The provider's configured source, the model replaced: its key and effort kept.
        assert named is not None
        assert named.sources[0].effort is Effort.HIGH
        assert router.find("gpt-unknown") is None
    finally:
        import asyncio

        asyncio.run(router.aclose())


def test_serve_command_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--config", str(tmp_path / "missing.toml")]) == 2
    assert "missing.toml" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text('[[route]]\nname = "x"\n')
    assert main(["serve", "--config", str(bad)]) == 2
    assert "a route needs at least one source" in capsys.readouterr().err
    for text, words in (
        ('thinking = 5\n[[source]]\nprovider = "openai"\nmodel = "gpt-5.5"\n', "thinking"),
        ("source = [1, 2]\n", "source #0"),
        ("route = [1]\n", "route #0"),
        ("tenant = [1]\n", "tenant #0"),
    ):
        bad.write_text(text)
        assert main(["serve", "--config", str(bad)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert f"{words} must be" in err
    assert main(["serve", "--port", "99999"]) == 2


def _answer(finish: str, usage: Usage, **fields: Any) -> Response:
    return Response(
        text="done",
        reasoning=None,
        tool_calls=[],
        finish_reason=finish,
        usage=usage,
        model="m",
        provider="openai",
        source_index=0,
        message=Message(role="assistant", content="done"),
        **fields,
    )


def test_usage_and_stop_reasons_in_each_doors_counting() -> None:
    """1,000 prompt tokens of which 600 read from the cache and 100 written to it; 250
    output tokens of which 200 reasoning: each door counts them its own way."""
    usage = Usage(
        input_tokens=1000,
        output_tokens=250,
        reasoning_tokens=200,
        cache_read_tokens=600,
        cache_write_tokens=100,
    )
    call: Any = None
    chat = ChatDoor().render(call, _answer("length", usage))
    assert chat["usage"] == {
        "prompt_tokens": 1000,
        "completion_tokens": 250,
        "total_tokens": 1250,
        "prompt_tokens_details": {"cached_tokens": 600, "cache_write_tokens": 100},
        "completion_tokens_details": {"reasoning_tokens": 200},
    }
    assert chat["choices"][0]["finish_reason"] == "length"
    messages = MessagesDoor().render(call, _answer("length", usage))
    assert messages["usage"] == {
        "input_tokens": 300,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 600,
        "output_tokens": 250,
    }
    assert messages["stop_reason"] == "max_tokens"
    assert MessagesDoor().render(call, _answer("content_filter", usage))["stop_reason"] == "refusal"
    responses = ResponsesDoor().render(call, _answer("length", usage))
    assert responses["usage"] == {
        "input_tokens": 1000,
        "input_tokens_details": {"cached_tokens": 600, "cache_write_tokens": 100},
        "output_tokens": 250,
        "output_tokens_details": {"reasoning_tokens": 200},
        "total_tokens": 1250,
    }
    assert (responses["status"], responses["incomplete_details"]) == (
        "incomplete",
        {"reason": "max_output_tokens"},
    )
    # An Anthropic answer keeps its own stop reason.
    own = _answer("stop", usage, native_finish_reason="stop_sequence").with_(provider="anthropic")
    assert MessagesDoor().render(call, own)["stop_reason"] == "stop_sequence"
