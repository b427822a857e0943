"""Reasoning rejections, parsed exactly, on every wire and in every shape; and what they teach."""

from __future__ import annotations

from typing import Any

import pytest

from polythink.reasoning import Capability, get_capability
from polythink.reasoning.learn import (
    ReasoningRejection,
    learned_capability,
    parse_reasoning_rejection,
)
from polythink.types import Effort

N, MI, L, M, H, X, MAX, A = (
    Effort.NONE,
    Effort.MINIMAL,
    Effort.LOW,
    Effort.MEDIUM,
    Effort.HIGH,
    Effort.XHIGH,
    Effort.MAX,
    Effort.AUTO,
)


def _openai(message: str, param: str | None, code: str | None) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": param,
            "code": code,
        }
    }


def _anthropic(message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


def _gemini(message: str) -> dict[str, Any]:
    return {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}


SHAPES: list[tuple[str, int, Any, ReasoningRejection]] = [
    (
        "openai_chat_unsupported_value",
        400,
        _openai(
            "Unsupported value: 'reasoning_effort' does not support 'none' with this model. "
            "Supported values are: 'minimal', 'low', 'medium', and 'high'.",
            "reasoning_effort",
            "unsupported_value",
        ),
        ReasoningRejection(
            "tier",
            accepted=(MI, L, M, H),
            rejected=N,
            gist="Unsupported value: 'reasoning_effort' does not support 'none' with this model. "
            "Supported values are: 'minimal', 'low', 'medium', and 'high'.",
        ),
    ),
    (
        "openai_chat_unsupported_value_model_named",
        400,
        _openai(
            "Unsupported value: 'minimal' is not supported with the 'gpt-5.1' model. Supported "
            "values are: 'none', 'low', 'medium', and 'high'.",
            "reasoning_effort",
            "unsupported_value",
        ),
        ReasoningRejection(
            "tier",
            accepted=(N, L, M, H),
            rejected=MI,
            gist="Unsupported value: 'minimal' is not supported with the 'gpt-5.1' model. "
            "Supported values are: 'none', 'low', 'medium', and 'high'.",
        ),
    ),
    (
        "openai_responses_unsupported_value",
        400,
        _openai(
            "Unsupported value: 'reasoning.effort' does not support 'xhigh' with this model. "
            "Supported values are: 'low', 'medium', and 'high'.",
            "reasoning.effort",
            "unsupported_value",
        ),
        ReasoningRejection(
            "tier",
            accepted=(L, M, H),
            rejected=X,
            gist="Unsupported value: 'reasoning.effort' does not support 'xhigh' with this "
            "model. Supported values are: 'low', 'medium', and 'high'.",
        ),
    ),
    (
        "openai_unsupported_parameter",
        400,
        _openai(
            "Unsupported parameter: 'reasoning_effort' is not supported with this model.",
            "reasoning_effort",
            "unsupported_parameter",
        ),
        ReasoningRejection(
            "no_parameter",
            gist="Unsupported parameter: 'reasoning_effort' is not supported with this model.",
        ),
    ),
    (
        "openai_responses_unsupported_parameter",
        400,
        _openai(
            "Unsupported parameter: 'reasoning.effort' is not supported with this model.",
            "reasoning.effort",
            "unsupported_parameter",
        ),
        ReasoningRejection(
            "no_parameter",
            gist="Unsupported parameter: 'reasoning.effort' is not supported with this model.",
        ),
    ),
    (
        "openai_compatible_gateway_unrecognized_argument",
        400,
        _openai("Unrecognized request argument supplied: reasoning_effort", None, None),
        ReasoningRejection(
            "no_parameter", gist="Unrecognized request argument supplied: reasoning_effort"
        ),
    ),
    (
        "xai_bare_string_without_param",
        400,
        {
            "code": "Client specified an invalid argument",
            "error": "Model grok-4-latest does not support parameter reasoningEffort.",
        },
        ReasoningRejection(
            "no_parameter", gist="Model grok-4-latest does not support parameter reasoningEffort."
        ),
    ),
    (
        "xai_plain_text_body",
        400,
        '"Model grok-build-0.1 does not support parameter reasoningEffort."',
        ReasoningRejection(
            "no_parameter",
            gist='"Model grok-build-0.1 does not support parameter reasoningEffort."',
        ),
    ),
    (
        "xai_invalid_reasoning_effort",
        400,
        {"code": "invalid-argument", "error": "Invalid reasoning effort."},
        ReasoningRejection("tier", gist="Invalid reasoning effort."),
    ),
    (
        "groq_must_be_one_of",
        400,
        {"error": {"message": "`reasoning_effort` must be one of `none` or `default`"}},
        ReasoningRejection(
            "tier",
            accepted=(N, A),
            gist="`reasoning_effort` must be one of `none` or `default`",
        ),
    ),
    (
        "validation_422_detail_list",
        422,
        {
            "detail": [
                {
                    "type": "literal_error",
                    "loc": ["body", "reasoning_effort"],
                    "msg": "Input should be 'low', 'medium' or 'high'",
                    "input": "max",
                }
            ]
        },
        ReasoningRejection(
            "tier",
            accepted=(L, M, H),
            gist="body.reasoning_effort: Input should be 'low', 'medium' or 'high'",
        ),
    ),
    (
        "validation_422_nested_loc",
        422,
        {
            "detail": [
                {
                    "loc": ["body", "reasoning", "effort"],
                    "msg": "Input should be 'low' or 'high'",
                    "type": "literal_error",
                }
            ]
        },
        ReasoningRejection(
            "tier", accepted=(L, H), gist="body.reasoning.effort: Input should be 'low' or 'high'"
        ),
    ),
    (
        "validation_422_flattened_message",
        422,
        {
            "message": "body.reasoning_effort: Input should be 'low', 'medium' or 'high'\n"
            "body.reasoning: property 'body.reasoning' is unsupported",
            "type": "invalid_request_error",
            "param": "validation_error",
            "code": "wrong_api_format",
        },
        ReasoningRejection(
            "tier",
            accepted=(L, M, H),
            gist="body.reasoning_effort: Input should be 'low', 'medium' or 'high'",
        ),
    ),
    (
        "anthropic_does_not_support_thinking",
        400,
        _anthropic("'claude-3-5-haiku-20241022' does not support thinking."),
        ReasoningRejection(
            "no_parameter", gist="'claude-3-5-haiku-20241022' does not support thinking."
        ),
    ),
    (
        "anthropic_no_effort_parameter",
        400,
        _anthropic("This model does not support the effort parameter."),
        ReasoningRejection("no_strength", gist="This model does not support the effort parameter."),
    ),
    (
        "anthropic_effort_level",
        400,
        _anthropic("This model does not support effort level 'max'."),
        ReasoningRejection(
            "tier", rejected=MAX, gist="This model does not support effort level 'max'."
        ),
    ),
    (
        "anthropic_effort_with_supported_values",
        400,
        _anthropic(
            "output_config.effort: 'max' is not supported for model claude-sonnet-4-6; "
            "supported values: 'low', 'medium', 'high'"
        ),
        ReasoningRejection(
            "tier",
            accepted=(L, M, H),
            rejected=MAX,
            gist="output_config.effort: 'max' is not supported for model claude-sonnet-4-6; "
            "supported values: 'low', 'medium', 'high'",
        ),
    ),
    (
        "anthropic_effort_without_thinking",
        400,
        _anthropic(
            "output_config.effort 'xhigh' is not supported when thinking is disabled on this "
            "model. Use effort 'high' or below, or enable thinking."
        ),
        ReasoningRejection(
            "tier",
            rejected=X,
            gist="output_config.effort 'xhigh' is not supported when thinking is disabled on "
            "this model. Use effort 'high' or below, or enable thinking.",
        ),
    ),
    (
        "anthropic_manual_thinking_refused",
        400,
        _anthropic(
            '"thinking.type.enabled" is not supported for this model. Use '
            '"thinking.type.adaptive" and "output_config.effort" to control thinking behavior.'
        ),
        ReasoningRejection(
            "style",
            style="adaptive",
            gist='"thinking.type.enabled" is not supported for this model. Use '
            '"thinking.type.adaptive" and "output_config.effort" to control thinking behavior.',
        ),
    ),
    (
        "anthropic_disabled_refused",
        400,
        _anthropic(
            '"thinking.type.disabled" is not supported for model claude-opus-4-7; thinking '
            "cannot be switched off on it."
        ),
        ReasoningRejection(
            "cannot_disable",
            gist='"thinking.type.disabled" is not supported for model claude-opus-4-7; '
            "thinking cannot be switched off on it.",
        ),
    ),
    (
        "gemini_budget_zero",
        400,
        _gemini("Budget 0 is invalid. This model only works in thinking mode."),
        ReasoningRejection(
            "cannot_disable", gist="Budget 0 is invalid. This model only works in thinking mode."
        ),
    ),
    (
        "gemini_vertex_budget_zero",
        400,
        _gemini(
            "Unable to submit request because The model does not support setting "
            "thinking_budget to 0"
        ),
        ReasoningRejection(
            "cannot_disable",
            gist="Unable to submit request because The model does not support setting "
            "thinking_budget to 0",
        ),
    ),
    (
        "gemini_budget_out_of_range",
        400,
        _gemini(
            "thinking_budget is out of range; supported values are integers from 1 to 24576. "
            "Learn more: https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/"
            "gemini"
        ),
        ReasoningRejection(
            "budget",
            budget_min=1,
            budget_max=24576,
            gist="thinking_budget is out of range; supported values are integers from 1 to "
            "24576. Learn more: https://cloud.google.com/vertex-ai/generative-ai/docs/"
            "model-reference/gemini",
        ),
    ),
    (
        "gemini_budget_choose_between",
        400,
        _gemini(
            "The thinking budget 40000 is invalid. Please choose a value between 128 and 32768."
        ),
        ReasoningRejection(
            "budget",
            budget_min=128,
            budget_max=32768,
            gist="The thinking budget 40000 is invalid. Please choose a value between 128 and "
            "32768.",
        ),
    ),
    (
        "gemini_budget_invalid_wrapped_by_a_gateway",
        400,
        {
            "error": {
                "message": '{\n  "error": {\n    "code": 400,\n    "message": "The thinking '
                'budget (52428) is invalid.",\n    "status": "INVALID_ARGUMENT"\n  }\n}\n',
                "code": 400,
                "status": "Bad Request",
            }
        },
        ReasoningRejection("tier", gist="The thinking budget (52428) is invalid."),
    ),
    (
        "gemini_level_refused",
        400,
        _gemini("Thinking level MINIMAL is not supported for this model."),
        ReasoningRejection(
            "tier", rejected=MI, gist="Thinking level MINIMAL is not supported for this model."
        ),
    ),
    (
        "gemini_level_on_a_budget_model",
        400,
        _gemini("Thinking level is not supported for this model."),
        ReasoningRejection(
            "style", style="budget", gist="Thinking level is not supported for this model."
        ),
    ),
    (
        "gemini_error_list",
        400,
        [_gemini("Thinking level HIGH is not supported for this model.")],
        ReasoningRejection(
            "tier", rejected=H, gist="Thinking level HIGH is not supported for this model."
        ),
    ),
    (
        "dashscope_thinking_only",
        400,
        {
            "error": {
                "message": "The value of the enable_thinking parameter is restricted to True",
                "type": "invalid_request_error",
                "code": "invalid_parameter_error",
            }
        },
        ReasoningRejection(
            "cannot_disable",
            gist="The value of the enable_thinking parameter is restricted to True",
        ),
    ),
    (
        "ollama_invalid_value",
        400,
        {
            "error": {
                "message": 'invalid reasoning value: "ultra-max" (must be "minimal", "low", '
                '"medium", "high", "xhigh", "ultra", "max", or "none")',
                "type": "invalid_request_error",
            }
        },
        ReasoningRejection(
            "tier",
            accepted=(N, MI, L, M, H, X, MAX),
            gist='invalid reasoning value: "ultra-max" (must be "minimal", "low", "medium", '
            '"high", "xhigh", "ultra", "max", or "none")',
        ),
    ),
]


@pytest.mark.parametrize(
    ("status", "body", "expected"), [s[1:] for s in SHAPES], ids=[s[0] for s in SHAPES]
)
def test_learn_parses_every_rejection_shape_exactly(
    status: int, body: Any, expected: ReasoningRejection
) -> None:
    assert parse_reasoning_rejection(status, body) == expected


UNRELATED: list[tuple[str, int, Any]] = [
    (
        "temperature_unsupported_value",
        400,
        _openai(
            "Unsupported value: 'temperature' does not support 0 with this model. Only the "
            "default (1) value is supported.",
            "temperature",
            "unsupported_value",
        ),
    ),
    (
        "max_tokens_unsupported_parameter",
        400,
        _openai(
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
            "'max_completion_tokens' instead.",
            "max_tokens",
            "unsupported_parameter",
        ),
    ),
    ("generic_invalid_request", 400, _openai("Invalid request", None, None)),
    (
        "anthropic_thinking_block_order",
        400,
        _anthropic(
            "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
            "`text`. When `thinking` is enabled, a final `assistant` message must start with a "
            "thinking block."
        ),
    ),
    (
        "gemini_missing_signature",
        400,
        _gemini("Function call is missing a thought_signature in functionCall parts."),
    ),
    (
        "validation_422_other_field",
        422,
        {"detail": [{"loc": ["body", "temperature"], "msg": "Input should be less than 2"}]},
    ),
    (
        "right_text_wrong_status",
        500,
        _openai(
            "Unsupported parameter: 'reasoning_effort' is not supported with this model.",
            "reasoning_effort",
            "unsupported_parameter",
        ),
    ),
    ("empty_body", 400, None),
]


@pytest.mark.parametrize(
    ("status", "body"), [u[1:] for u in UNRELATED], ids=[u[0] for u in UNRELATED]
)
def test_learn_ignores_unrecognised_shapes(status: int, body: Any) -> None:
    assert parse_reasoning_rejection(status, body) is None


def _learned(
    base: Capability | None, rejection: ReasoningRejection, wire: str, sent: Effort | None
) -> Capability | None:
    return learned_capability(
        base,
        rejection,
        model=base.model if base else "mystery-1",
        provider="openai",
        wire=wire,
        sent=sent,
        evidence="observed 2026-12-01 on openai: test",
    )


def test_learned_capability_takes_a_listed_set_as_the_whole_truth_on_effort_wires() -> None:
    base = get_capability("gpt-5.5")
    assert base is not None
    learned = _learned(base, ReasoningRejection("tier", accepted=(L, M, H)), "effort", X)
    assert learned is not None
    assert learned.supported_efforts == (L, M, H)
    assert learned.default_effort is M
    assert learned.max_output_tokens == base.max_output_tokens
    assert learned.evidence == "observed 2026-12-01 on openai: test"


def test_learned_capability_keeps_the_off_switch_on_wires_where_it_is_another_field() -> None:
    base = get_capability("claude-sonnet-4-6")
    assert base is not None
    assert base.can_disable
    learned = _learned(base, ReasoningRejection("tier", accepted=(L, M, H)), "anthropic", MAX)
    assert learned is not None
    assert learned.supported_efforts == (N, L, M, H)
    assert learned.thinking == base.thinking


def test_learned_capability_drops_only_the_refused_tier_without_a_list() -> None:
    base = Capability("m", (N, MI, L, M, H), default_effort=MI)
    learned = _learned(base, ReasoningRejection("tier", rejected=MI), "gemini", L)
    assert learned is not None
    assert learned.supported_efforts == (N, L, M, H)
    assert learned.default_effort is None
    sent_only = _learned(base, ReasoningRejection("tier"), "gemini", H)
    assert sent_only is not None
    assert sent_only.supported_efforts == (N, MI, L, M)


def test_learned_capability_for_the_other_kinds() -> None:
    base = Capability("m", (N, L, M, H), default_effort=N, thinking="manual")
    assert _learned(base, ReasoningRejection("no_parameter"), "effort", H) is None
    on_off = _learned(base, ReasoningRejection("no_strength"), "anthropic", H)
    assert on_off is not None
    assert on_off.supported_efforts == (N, A)
    always = _learned(base, ReasoningRejection("cannot_disable"), "gemini", N)
    assert always is not None
    assert (always.supported_efforts, always.default_effort) == ((L, M, H), None)
    adaptive = _learned(base, ReasoningRejection("style", style="adaptive"), "anthropic", H)
    assert adaptive is not None
    assert (adaptive.thinking, adaptive.supported_efforts) == ("adaptive", (N, L, M, H))
    ranged = _learned(
        base, ReasoningRejection("budget", budget_min=128, budget_max=32768), "gemini", H
    )
    assert ranged is not None
    assert (ranged.budget_min, ranged.budget_max) == (128, 32768)


def test_learned_capability_of_an_unregistered_model_starts_from_every_tier() -> None:
    learned = _learned(None, ReasoningRejection("tier", rejected=MAX), "effort", MAX)
    assert learned is not None
    assert (learned.model, learned.provider) == ("mystery-1", "openai")
    assert learned.supported_efforts == (N, MI, L, M, H, X)


def test_learned_capability_refuses_a_rejection_of_everything() -> None:
    base = Capability("m", (H,))
    with pytest.raises(ValueError, match="a rejection of every tier of model 'm'"):
        _learned(base, ReasoningRejection("tier", rejected=H), "effort", H)
