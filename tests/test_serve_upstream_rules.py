"""What ``polythink serve`` sends upstream under the routed model's rules:
``output_config.effort`` translated for a model that takes a budget.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.conftest import sdk_module
from tests.gateway_support import GatewayServer, Recorder, gateway, recorder, sim

openai = sdk_module("openai")

__all__ = ["gateway", "recorder", "sim"]

HAIKU = "anthropic/claude-haiku-4-5"
"""A manual-thinking model (``thinking: enabled`` with ``budget_tokens``, no effort field)."""
PROMPT = [{"role": "user", "content": "classify: ok"}]
VERSION = {"anthropic-version": "2023-06-01"}
"""What the Anthropic SDKs send: a version that still takes sampling parameters."""


def _sent(recorder: Recorder, path: str) -> Any:
    return json.loads(recorder.last(path).body)


def _post(gateway: GatewayServer, path: str, body: dict[str, Any]) -> httpx.Response:
    answer = httpx.post(gateway.root + path, json=body, headers=VERSION, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer


# -- output_config.effort on a model that takes a budget -------------------------------------


def test_output_config_effort_becomes_the_budget_a_manual_model_takes(
    gateway: GatewayServer, recorder: Recorder
) -> None:
    body = {
        "model": HAIKU,
        "max_tokens": 2048,
        "output_config": {"effort": "high"},
        "messages": PROMPT,
    }
    answer = _post(gateway, "/v1/messages", body)
    # As `polythink resolve --provider anthropic --model claude-haiku-4-5 --effort high` says.
    assert _sent(recorder, "/messages") == {
        "model": "claude-haiku-4-5",
        "max_tokens": 18432,
        "messages": PROMPT,
        "thinking": {"type": "enabled", "budget_tokens": 16384},
    }
    assert answer.headers["x-polythink-requested-effort"] == "high"
    assert answer.headers["x-polythink-applied-effort"] == "high"
    assert answer.headers["x-polythink-reasoning"] == "observed"
    assert answer.headers["x-polythink-warnings"] == (
        "reasoning fields rewritten for anthropic model 'claude-haiku-4-5': the request asked "
        "'high' in the anthropic dialect (output_config.effort), sent 'high' as the model "
        "takes it"
    )
    # Beside manual thinking, the effort field is still not the model's: one tier, in its
    # own fields (the output ceiling keeps the caller's room).
    mixed = {**body, "max_tokens": 20000, "thinking": {"type": "enabled", "budget_tokens": 4000}}
    answer = _post(gateway, "/v1/messages", mixed)
    assert _sent(recorder, "/messages") == {
        "model": "claude-haiku-4-5",
        "max_tokens": 36384,
        "messages": PROMPT,
        "thinking": {"type": "enabled", "budget_tokens": 16384},
    }
    assert answer.headers["x-polythink-applied-effort"] == "high"


def test_output_config_effort_goes_as_written_to_an_adaptive_model(
    gateway: GatewayServer, recorder: Recorder
) -> None:
    body = {
        "model": "to-anthropic",
        "max_tokens": 2048,
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "high"},
        "messages": PROMPT,
    }
    answer = _post(gateway, "/v1/messages", body)
    assert _sent(recorder, "/messages") == {**body, "model": "claude-sonnet-4-6"}
    assert answer.headers["x-polythink-applied-effort"] == "high"
    assert "x-polythink-warnings" not in answer.headers
