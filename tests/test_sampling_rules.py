"""Sampling parameters a model rejects are refused (or dropped) before any HTTP call.

OpenAI reasoning models take ``temperature``/``top_p`` only while they do not reason;
Claude Opus 4.7 and Sonnet 5 take only the defaults (``Capability.sampling``; sources in
capabilities.toml). Other providers ignore what they do not take, so nothing is checked there.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
import respx

from polythink import Client, Source
from polythink.errors import ThinkingUnsupportedError

KEY = "sk-test-0000000000000000"
CHAT = "https://api.openai.com/v1/chat/completions"
MESSAGES = "https://api.anthropic.com/v1/messages"
HI = [{"role": "user", "content": "hi"}]
CHAT_ANSWER = {
    "id": "c1",
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
}
CLAUDE_ANSWER = {
    "id": "msg_1",
    "model": "claude-opus-4-7",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 3, "output_tokens": 1},
}


async def _call(source: Source, **kwargs: Any) -> tuple[int, dict[str, Any] | None, Any]:
    with respx.mock(assert_all_called=False) as router:
        chat = router.post(CHAT).mock(return_value=httpx.Response(200, json=CHAT_ANSWER))
        claude = router.post(MESSAGES).mock(return_value=httpx.Response(200, json=CLAUDE_ANSWER))
        async with Client([source]) as client:
            try:
                answer: Any = await client.complete(HI, **kwargs)
            except ThinkingUnsupportedError as exc:
                answer = exc
    route = chat if chat.call_count else claude
    body = json.loads(route.calls.last.request.content) if route.call_count else None
    return chat.call_count + claude.call_count, body, answer


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("model", "kwargs"),
    [
        ("gpt-5.5", {"reasoning_effort": "high", "temperature": 0}),
        ("gpt-5.5", {"temperature": 0.2}),
        ("o3-mini", {"top_p": 0.5}),
    ],
)
async def test_openai_reasoning_models_refuse_sampling_while_they_reason(
    model: str, kwargs: dict[str, Any]
) -> None:
    calls, _, answer = await _call(Source("openai", model, api_key=KEY), **kwargs)
    assert calls == 0
    assert isinstance(answer, ThinkingUnsupportedError)
    assert answer.error_type == "parameter_conflict"
    name = "temperature" if "temperature" in kwargs else "top_p"
    assert answer.message.startswith(f"openai model {model!r} rejects {name} while it reasons")
    assert "drop_params=True" in answer.message


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("model", "kwargs"),
    [
        ("gpt-5.5", {"reasoning_effort": "none", "temperature": 0, "top_p": 0.5}),
        ("gpt-4o", {"temperature": 0, "top_p": 0.5}),
        ("gpt-5.5", {"reasoning_effort": "high", "temperature": 1, "top_p": 1}),
    ],
)
async def test_openai_sampling_passes_where_it_is_accepted(
    model: str, kwargs: dict[str, Any]
) -> None:
    calls, body, answer = await _call(Source("openai", model, api_key=KEY), **kwargs)
    assert calls == 1
    assert body is not None
    assert (body["temperature"], body["top_p"]) == (kwargs["temperature"], kwargs["top_p"])
    assert not [w for w in answer.warnings if w.startswith("dropped")]


@pytest.mark.anyio
async def test_drop_params_drops_and_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="polythink")
    source = Source("openai", "gpt-5.5", api_key=KEY, drop_params=True)
    with respx.mock() as router:
        route = router.post(CHAT).mock(return_value=httpx.Response(200, json=CHAT_ANSWER))
        async with Client([source]) as client:
            answers = [
                await client.complete(HI, reasoning_effort="high", temperature=0, top_p=0.5)
                for _ in range(2)
            ]
    bodies = [json.loads(call.request.content) for call in route.calls]
    assert all("temperature" not in b and "top_p" not in b for b in bodies)
    expected = [
        "dropped temperature=0 for openai model 'gpt-5.5' (drop_params=True)",
        "dropped top_p=0.5 for openai model 'gpt-5.5' (drop_params=True)",
    ]
    assert [w for w in answers[0].warnings if w.startswith("dropped")] == expected
    assert [w for w in answers[1].warnings if w.startswith("dropped")] == expected
    logged = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert logged == [f"source 0: {note}" for note in expected]


@pytest.mark.anyio
@pytest.mark.parametrize("effort", [None, "none", "high"])
async def test_claude_opus_4_7_takes_only_default_sampling(effort: str | None) -> None:
    # On 2023-06-01, the version that still takes sampling parameters at all (CURRENT §1.4).
    source = Source("anthropic", "claude-opus-4-7", api_key=KEY, api_version="2023-06-01")
    calls, _, answer = await _call(source, reasoning_effort=effort, temperature=0)
    assert calls == 0
    assert isinstance(answer, ThinkingUnsupportedError)
    assert "rejects temperature (only the defaults are accepted): temperature=0" in answer.message
    calls, body, answer = await _call(source, reasoning_effort=effort, temperature=1)
    assert calls == 1
    assert body is not None
    assert body["temperature"] == 1


@pytest.mark.anyio
async def test_a_refused_parameter_fails_over_to_a_source_that_takes_it() -> None:
    sources = [
        Source("openai", "o3", api_key=KEY),
        Source("openai", "gpt-4o", api_key=KEY),
    ]
    with respx.mock() as router:
        route = router.post(CHAT).mock(return_value=httpx.Response(200, json=CHAT_ANSWER))
        async with Client(sources) as client:
            answer = await client.complete(HI, temperature=0)
    assert route.call_count == 1
    assert json.loads(route.calls.last.request.content)["model"] == "gpt-4o"
    assert answer.source_index == 1
