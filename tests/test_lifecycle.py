"""Model lifecycle: retired models warn once per process, a provider's "model not found" is a
ModelNotFoundError naming the replacement, failover moves past it, ``models --retired``.

The shutdown dates and replacements come from ../shared/wire/CURRENT.md §2 (read 2026-12-01);
the error bodies are the providers' own, as reported in public bug reports (cited per case).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
import respx

from polythink import Client, ModelNotFoundError, RequestRejectedError, Source
from polythink.capability_store import CapabilityStore
from polythink.cli import main
from polythink.middleware import reasoning as reasoning_layer
from polythink.middleware.failover import counts_against, fails_over
from polythink.reasoning import get_capability
from polythink.reasoning.lifecycle import lifecycle_note, status
from polythink.transports.error_map import error_from_body, error_from_status

HI = [{"role": "user", "content": "hi"}]
KEY = "sk-test-000000000000"


def _store(day: str) -> CapabilityStore:
    return CapabilityStore(None, today=lambda: day)


@pytest.mark.parametrize(
    ("model", "day", "expected"),
    [
        # claude-sonnet-4-5 retired 2026-11-30 (CUR §2.2); announced, so deprecated before.
        ("claude-sonnet-4-5", "2026-11-29", "deprecated"),
        ("claude-sonnet-4-5", "2026-11-30", "retired"),
        # gpt-5 shuts down 2026-12-11 (CUR §2.1): announced, so deprecated until then.
        ("gpt-5", "2026-12-01", "deprecated"),
        ("gpt-5", "2026-12-11", "retired"),
        # claude-opus-4-5 deprecated 2026-11-23, retiring 2027-01-22 (CUR §2.2).
        ("claude-opus-4-5", "2026-12-01", "deprecated"),
        ("claude-opus-5-5", "2026-12-01", "current"),
    ],
)
def test_status_follows_the_registry_dates(model: str, day: str, expected: str) -> None:
    assert status(get_capability(model), day) == expected


def test_the_note_names_the_date_and_the_replacement() -> None:
    # gemini-2.5-pro shut down 2026-12-01, auto-routed to gemini-3.8-flash (CUR §2.3).
    assert lifecycle_note("gemini-2.5-pro", get_capability("gemini-2.5-pro"), "2026-12-01") == (
        "model 'gemini-2.5-pro' was shut down by its provider on 2026-12-01; use "
        "'gemini-3.8-flash' instead (a call may still be answered through an alias or a "
        "re-route to another model, or refused as model not found)"
    )
    assert lifecycle_note("gpt-5.5", get_capability("gpt-5.5"), "2026-12-01") is None


@pytest.mark.anyio
async def test_a_retired_model_warns_once_per_process_naming_the_replacement(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reasoning_layer, "_retired_warned", set())
    answer = {
        "id": "c",
        "model": "deepseek-v4-flash",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
    }
    source = Source("deepseek", "deepseek-reasoner", api_key=KEY)
    caplog.set_level(logging.WARNING, logger="polythink.lifecycle")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post("https://api.deepseek.com/chat/completions").mock(
            return_value=httpx.Response(200, json=answer)
        )
        for _ in range(2):
            async with Client([source], capabilities_store=_store("2026-12-01")) as client:
                await client.complete(HI)
                await client.complete(HI)
    # The call still goes out: the provider may answer it through an alias.
    assert route.call_count == 4
    notes = [r.getMessage() for r in caplog.records if r.name == "polythink.lifecycle"]
    assert notes == [
        "model 'deepseek-reasoner' was shut down by its provider on 2026-07-24; use "
        "'deepseek-v4-flash' instead (a call may still be answered through an alias or a "
        "re-route to another model, or refused as model not found)"
    ]


@pytest.mark.anyio
async def test_a_model_served_elsewhere_is_not_retired_there(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # qwen3-32b left Groq on 2026-07-17; a vLLM server of one's own still serves it.
    monkeypatch.setattr(reasoning_layer, "_retired_warned", set())
    caplog.set_level(logging.WARNING, logger="polythink.lifecycle")
    source = Source("vllm", "qwen3-32b", base_url="http://127.0.0.1:9/v1")
    answer = {
        "id": "c",
        "model": "qwen3-32b",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
    }
    with respx.mock(assert_all_called=True) as mock:
        mock.post("http://127.0.0.1:9/v1/chat/completions").mock(
            return_value=httpx.Response(200, json=answer)
        )
        async with Client([source], capabilities_store=_store("2026-12-01")) as client:
            await client.complete(HI)
    assert [r for r in caplog.records if r.name == "polythink.lifecycle"] == []


# ------------------------------------------------------------------ "model not found"

NOT_FOUND: list[tuple[str, int, dict[str, Any]]] = [
    # OpenAI 404 model_not_found (the message as relayed in siteboon/claudecodeui#951, 2026-07).
    (
        "openai",
        404,
        {
            "error": {
                "message": "The model `o3-mini` does not exist or you do not have access to it.",
                "type": "invalid_request_error",
                "param": None,
                "code": "model_not_found",
            }
        },
    ),
    # Anthropic 404 not_found_error, two wordings (continuedev/continue#9476, 2026-01;
    # anthropics/claude-code#41120, 2026-03).
    (
        "anthropic",
        404,
        {"type": "error", "error": {"type": "not_found_error", "message": "model: x"}},
    ),
    (
        "anthropic",
        404,
        {"type": "error", "error": {"type": "not_found_error", "message": "model 'x' not found"}},
    ),
    # Gemini 404 NOT_FOUND (wwardaww/gnome-gemini-ai#21, 2025-03).
    (
        "gemini",
        404,
        {
            "error": {
                "code": 404,
                "message": "models/gemini-1.0-pro is not found for API version v1beta, or is "
                "not supported for generateContent. Call ListModels to see the list of "
                "available models and their supported methods.",
                "status": "NOT_FOUND",
            }
        },
    ),
    # Groq 400 model_decommissioned (valentinfrlch/ha-llmvision#324, 2025-04).
    (
        "groq",
        400,
        {
            "error": {
                "message": "The model `llama-3.2-11b-vision-preview` has been decommissioned "
                "and is no longer supported. Please refer to "
                "https://console.groq.com/docs/deprecations for a recommendation on which "
                "model to use instead.",
                "type": "invalid_request_error",
                "code": "model_decommissioned",
            }
        },
    ),
]


@pytest.mark.parametrize(("provider", "status_code", "body"), NOT_FOUND)
def test_each_providers_model_not_found_is_typed(
    provider: str, status_code: int, body: dict[str, Any]
) -> None:
    error = error_from_status(
        status_code, {}, json.dumps(body).encode(), provider=provider, source_index=0
    )
    assert type(error) is ModelNotFoundError
    assert isinstance(error, RequestRejectedError)
    assert error.status_code == status_code
    assert fails_over(error)
    assert counts_against(error)


def test_an_in_band_model_not_found_is_typed_too() -> None:
    body = {"type": "error", "error": {"type": "not_found_error", "message": "model: x"}}
    assert type(error_from_body(body, provider="anthropic", source_index=0)) is (ModelNotFoundError)


@pytest.mark.parametrize(
    "body",
    [
        # A wrong base URL behind a proxy (anthropics/claude-code#50229, 2026-04).
        b"404 page not found",
        # Another resource that is not there.
        json.dumps({"error": {"message": "Item with id 'rs_1' not found.", "code": None}}).encode(),
    ],
)
def test_other_404s_stay_plain_rejections(body: bytes) -> None:
    error = error_from_status(404, {}, body, provider="openai", source_index=0)
    assert type(error) is RequestRejectedError
    assert not fails_over(error)


@pytest.mark.anyio
async def test_not_found_names_the_replacement_and_failover_moves_on() -> None:
    retired = Source("openai", "o4-mini", api_key=KEY, max_retries=0)
    current = Source("anthropic", "claude-haiku-4-5", api_key="sk-ant-test-0000000000")
    gone = {
        "error": {
            "message": "The model `o4-mini` does not exist or you do not have access to it.",
            "type": "invalid_request_error",
            "param": None,
            "code": "model_not_found",
        }
    }
    answer = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }
    with respx.mock(assert_all_called=True) as mock:
        first = mock.post("https://api.openai.com/v1/chat/completions").mock(
            return_value=httpx.Response(404, json=gone)
        )
        mock.post("https://api.anthropic.com/v1/messages").mock(
            return_value=httpx.Response(200, json=answer)
        )
        async with Client([retired, current], capabilities_store=False) as client:
            response = await client.complete(HI)
            # Alone, the error reaches the caller typed, with the model it was about.
            async with Client([retired], capabilities_store=False) as alone:
                with pytest.raises(ModelNotFoundError) as info:
                    await alone.complete(HI)
    assert first.call_count == 2
    assert (response.source_index, response.text) == (1, "ok")
    assert response.warnings[0].startswith("failover: ")
    assert (info.value.model, info.value.replacement) == ("o4-mini", None)


@pytest.mark.anyio
async def test_not_found_names_the_registry_replacement() -> None:
    retired = Source("openai", "gpt-5.2-chat-latest", api_key=KEY, max_retries=0)
    gone = {
        "error": {
            "message": "The model `gpt-5.2-chat-latest` does not exist or you do not have "
            "access to it.",
            "type": "invalid_request_error",
            "param": None,
            "code": "model_not_found",
        }
    }
    with respx.mock(assert_all_called=True) as mock:
        mock.post("https://api.openai.com/v1/chat/completions").mock(
            return_value=httpx.Response(404, json=gone)
        )
        async with Client([retired], capabilities_store=False) as client:
            with pytest.raises(ModelNotFoundError) as info:
                await client.complete(HI)
    # gpt-5.2-chat-latest shut down 2026-08-10, replacement gpt-5.5 (CUR §2.1).
    assert (info.value.model, info.value.replacement) == ("gpt-5.2-chat-latest", "gpt-5.5")
    assert info.value.message == (
        "openai answered HTTP 404: The model `gpt-5.2-chat-latest` does not exist or you do not "
        "have access to it. (model 'gpt-5.2-chat-latest'; the registry names 'gpt-5.5' as its "
        "replacement)"
    )


# ------------------------------------------------------------------ models --retired


def test_models_retired_lists_dates_and_replacements(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POLYTHINK_CAPABILITIES", "off")
    monkeypatch.setattr(CapabilityStore, "today", lambda self: "2026-12-01")
    assert main(["models", "--retired", "--provider", "gemini", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows == [
        {
            "provider": "gemini",
            "model": "gemini-3-pro-preview",
            "status": "retired",
            "deprecated": None,
            "shutdown": "2026-03-09",
            "replacement": "gemini-3.1-pro-preview",
        },
        {
            "provider": "gemini",
            "model": "gemini-2.5-flash",
            "status": "retired",
            "deprecated": None,
            "shutdown": "2026-12-01",
            "replacement": "gemini-3.5-flash-lite",
        },
        {
            "provider": "gemini",
            "model": "gemini-2.5-pro",
            "status": "retired",
            "deprecated": None,
            "shutdown": "2026-12-01",
            "replacement": "gemini-3.8-flash",
        },
        {
            "provider": "gemini",
            "model": "gemini-3.1-flash-lite",
            "status": "deprecated",
            "deprecated": None,
            "shutdown": "2027-05-07",
            "replacement": None,
        },
    ]
    assert main(["models", "--retired", "--provider", "anthropic"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "provider",
        "model",
        "status",
        "deprecated",
        "shutdown",
        "replacement",
    ]
    assert lines[-1].split() == [
        "anthropic",
        "claude-opus-4-5",
        "deprecated",
        "2026-11-23",
        "2027-01-22",
        "claude-opus-5-5",
    ]


# ------------------------------------------------------------------ resolve on a retired id

GEMINI_25_PRO_NOTE = (
    "was shut down by its provider on 2026-12-01; use 'gemini-3.8-flash' instead (a call may "
    "still be answered through an alias or a re-route to another model, or refused as model "
    "not found)"
)


@pytest.mark.parametrize(
    ("provider", "model"),
    [
        ("gemini", "gemini-2.5-pro"),
        # The forms of its id a caller types (ids.toml): the Gemini API's resource name, a
        # Vertex publisher path, a gateway prefix, a stable version, a -latest alias.
        ("gemini", "models/gemini-2.5-pro"),
        ("gemini", "projects/p/locations/global/publishers/google/models/gemini-2.5-pro"),
        ("gemini", "google/gemini-2.5-pro"),
        ("gemini", "gemini-2.5-pro-001"),
        ("gemini", "gemini-2.5-pro-latest"),
    ],
)
def test_resolve_says_a_retired_id_is_retired_in_every_form(
    provider: str,
    model: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POLYTHINK_CAPABILITIES", "off")
    monkeypatch.setattr(CapabilityStore, "today", lambda self: "2026-12-04")
    argv = ["resolve", "--provider", provider, "--model", model, "--effort", "high"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["warnings"] == [f"model {model!r} {GEMINI_25_PRO_NOTE}"]
    assert out["applied_effort"] == "high"
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"warning    model {model!r} {GEMINI_25_PRO_NOTE}" in lines


def test_resolve_names_a_retired_model_even_when_the_tier_is_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POLYTHINK_CAPABILITIES", "off")
    monkeypatch.setattr(CapabilityStore, "today", lambda self: "2026-12-04")
    argv = ["resolve", "--provider", "gemini", "--model", "gemini-2.5-pro", "--effort", "none"]
    assert main([*argv, "--policy", "error", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["error"]["type"] == "ThinkingUnsupportedError"
    assert out["warnings"] == [f"model 'gemini-2.5-pro' {GEMINI_25_PRO_NOTE}"]


def test_resolve_does_not_retire_a_model_served_elsewhere(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Google retired gemini-2.5-pro; a gateway sets its own schedule.
    monkeypatch.setenv("POLYTHINK_CAPABILITIES", "off")
    monkeypatch.setattr(CapabilityStore, "today", lambda self: "2026-12-04")
    argv = ["resolve", "--provider", "openrouter", "--model", "google/gemini-2.5-pro"]
    assert main([*argv, "--effort", "high", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == []
