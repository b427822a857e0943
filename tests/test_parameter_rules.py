"""Parameter rules per model (polythink/reasoning/parameters.toml) are applied before sending.

Each case is a documented constraint with its source (the rule's ``source`` has the page and
date): refused before any HTTP request without ``drop_params``, dropped with a warning with it,
and untouched where the rule does not hold (thinking state, another endpoint, another model).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx

from polythink import Client, Source
from polythink.errors import ThinkingUnsupportedError
from polythink.providers import get_provider
from polythink.reasoning.parameters import parameter_conflicts, parameter_rules

KEY = "sk-test-0000000000000000"
HI = [{"role": "user", "content": "Answer in JSON: hi"}]
ANSWER = {
    "id": "c1",
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
}
STREAM = (
    b'data: {"id":"c1","model":"m","choices":[{"index":0,"delta":{"reasoning_content":"r"}}]}\n\n'
    b'data: {"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":"ok"},'
    b'"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


async def _call(source: Source, **kwargs: Any) -> tuple[list[dict[str, Any]], Any]:
    url = get_provider(source.provider).base_url + "/chat/completions"

    def answer(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content).get("stream"):
            return httpx.Response(
                200, content=STREAM, headers={"content-type": "text/event-stream"}
            )
        return httpx.Response(200, json=ANSWER)

    with respx.mock(assert_all_called=False) as router:
        route = router.post(url).mock(side_effect=answer)
        async with Client([source], http="httpx") as client:
            try:
                result: Any = await client.complete(HI, **kwargs)
            except ThinkingUnsupportedError as exc:
                result = exc
    return [json.loads(call.request.content) for call in route.calls], result


# ------------------------------------------------------------------ Kimi K2.5 / K2.6


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("model", "kwargs", "offending"),
    [
        # Thinking on (their default): temperature 1.0 only.
        ("kimi-k2.6", {"temperature": 0.3}, "temperature=0.3 (only 1 is accepted while thinking"),
        ("kimi-k2.5", {"temperature": 0.6}, "temperature=0.6 (only 1 is accepted while thinking"),
        # Thinking off: 0.6 only.
        (
            "kimi-k2.6",
            {"reasoning_effort": "none", "temperature": 1.0},
            "temperature=1.0 (only 0.6 is accepted without thinking",
        ),
        # top_p is fixed at 0.95 either way.
        ("kimi-k2.6", {"top_p": 0.5}, "top_p=0.5 (only 0.95 is accepted while thinking"),
        # K3: temperature 1 only, top_p refused.
        ("kimi-k3", {"top_p": 0.95}, "top_p (refused: Kimi K3 sampling)"),
    ],
)
async def test_kimi_fixed_sampling_is_refused_before_sending(
    model: str, kwargs: dict[str, Any], offending: str
) -> None:
    bodies, answer = await _call(Source("kimi", model, api_key=KEY), **kwargs)
    assert bodies == []
    assert isinstance(answer, ThinkingUnsupportedError)
    assert answer.error_type == "parameter_conflict"
    assert answer.message.startswith(f"kimi model {model!r} rejects ")
    assert offending in answer.message
    assert "drop_params=True" in answer.message


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("model", "kwargs", "sent"),
    [
        ("kimi-k2.6", {"temperature": 1.0, "top_p": 0.95}, {"temperature": 1.0, "top_p": 0.95}),
        (
            "kimi-k2.6",
            {"reasoning_effort": "none", "temperature": 0.6},
            {"temperature": 0.6, "thinking": {"type": "disabled"}},
        ),
        ("kimi-k3", {"temperature": 1}, {"temperature": 1}),
    ],
)
async def test_kimi_values_it_accepts_pass(
    model: str, kwargs: dict[str, Any], sent: dict[str, Any]
) -> None:
    bodies, answer = await _call(Source("kimi", model, api_key=KEY), **kwargs)
    assert len(bodies) == 1
    assert {k: bodies[0].get(k) for k in sent} == sent
    assert not [w for w in answer.warnings if w.startswith("dropped")]


@pytest.mark.anyio
async def test_kimi_drop_params_drops_the_pinned_value_and_warns() -> None:
    source = Source("kimi", "kimi-k2.6", api_key=KEY, drop_params=True)
    bodies, answer = await _call(source, temperature=0.2, top_p=0.95)
    assert len(bodies) == 1
    assert "temperature" not in bodies[0]
    assert bodies[0]["top_p"] == 0.95
    assert answer.warnings[-1] == (
        "dropped temperature=0.2 (only 1 is accepted while thinking: Kimi K2.5/K2.6 sampling "
        "while thinking) for kimi model 'kimi-k2.6' (drop_params=True)"
    )


@pytest.mark.anyio
async def test_the_rule_is_the_endpoints_not_the_models() -> None:
    # OpenRouter serves Kimi K2.6 under its own parameter handling: nothing is refused there.
    bodies, _ = await _call(
        Source("openrouter", "moonshotai/kimi-k2.6", api_key=KEY), temperature=0.3
    )
    assert len(bodies) == 1
    assert bodies[0]["temperature"] == 0.3


# ------------------------------------------------------------------ xAI


@pytest.mark.anyio
@pytest.mark.parametrize("model", ["grok-4.5", "grok-4.3", "grok-4.20-0309-reasoning"])
async def test_xai_reasoning_models_refuse_stop(model: str) -> None:
    bodies, answer = await _call(Source("xai", model, api_key=KEY), stop=["END"])
    assert bodies == []
    assert isinstance(answer, ThinkingUnsupportedError)
    assert "stop (refused: xAI reasoning models refuse stop and penalties)" in answer.message


@pytest.mark.anyio
async def test_xai_drop_params_drops_stop_and_a_non_reasoning_variant_keeps_it() -> None:
    dropped, answer = await _call(
        Source("xai", "grok-4.5", api_key=KEY, drop_params=True), stop=["END"]
    )
    assert "stop" not in dropped[0]
    assert answer.warnings[-1].startswith("dropped stop (refused: xAI reasoning models")
    kept, _ = await _call(Source("xai", "grok-4.20-non-reasoning", api_key=KEY), stop=["END"])
    assert kept[0]["stop"] == ["END"]


# ------------------------------------------------------------------ DashScope open-weight Qwen3


@pytest.mark.anyio
async def test_dashscope_refuses_json_mode_while_an_open_weight_qwen3_thinks() -> None:
    extra = {"response_format": {"type": "json_object"}}
    bodies, answer = await _call(
        Source("qwen", "qwen3-235b-a22b", api_key=KEY), reasoning_effort="auto", extra_body=extra
    )
    assert bodies == []
    assert isinstance(answer, ThinkingUnsupportedError)
    assert "response_format (refused while thinking" in answer.message
    # Without thinking the same JSON mode goes out, non-streamed.
    bodies, _ = await _call(
        Source("qwen", "qwen3-235b-a22b", api_key=KEY), reasoning_effort="none", extra_body=extra
    )
    assert [(b["response_format"], b["enable_thinking"], b["stream"]) for b in bodies] == [
        ({"type": "json_object"}, False, False)
    ]


@pytest.mark.anyio
async def test_an_open_weight_qwen3_thinking_call_is_streamed_from_the_first_call() -> None:
    # Documented, so no rejected non-streamed call is needed to learn it.
    bodies, answer = await _call(Source("qwen", "qwen3-235b-a22b-thinking-2507", api_key=KEY))
    assert [b["stream"] for b in bodies] == [True]
    assert answer.text == "ok"
    assert answer.reasoning == "r"


def test_rules_match_every_form_of_the_id_and_only_their_provider() -> None:
    names = [r.name for r in parameter_rules("kimi", "moonshotai/kimi-k2.6")]
    assert names == [
        "Kimi K2.5/K2.6 sampling while thinking",
        "Kimi K2.5/K2.6 sampling without thinking",
    ]
    assert parameter_rules("openrouter", "moonshotai/kimi-k2.6") == ()
    assert parameter_rules("kimi", "kimi-k2-thinking") == ()
    rules = parameter_rules("xai", "grok-4.20-0309-non-reasoning")
    assert parameter_conflicts(rules, {"stop": ["x"]}, thinking=False) == []
