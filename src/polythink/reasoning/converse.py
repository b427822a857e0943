"""How Bedrock's Converse API takes reasoning, per model vendor: data, and one pure function.

Converse has no reasoning field of its own: each vendor's field goes in
``additionalModelRequestFields``, passed to the model as it is (CLOUDS.md §1.3, WIRE.md §6.9).
The dialects, with their sources (read 2026-12-04):

- ``anthropic`` (Claude): ``thinking`` (``{type: enabled, budget_tokens}`` or
  ``{type: adaptive}``) and ``output_config.effort``, as on the Messages API; the output ceiling
  the budget raises is ``inferenceConfig.maxTokens`` (LiteLLM 1.110.2, pydantic-ai 2.68.0,
  UKGovernmentBEIS/inspect_ai#5300).
- ``reasoning_effort``: a flat ``reasoning_effort`` tier: gpt-oss (``low|medium|high``),
  DeepSeek, Kimi K2, GLM (LiteLLM, pydantic-ai, langchain-ai/docs#5239); the default for a
  vendor the table does not name.
- ``reasoning``: ``{"reasoning": {"effort": …}}`` for OpenAI's GPT-5.x and GPT-6 models, which
  answer 400 "Unknown parameter: 'reasoning_effort'" to the flat field (LiteLLM;
  stdapi-ai/stdapi.ai#283; Vercel's recorded error fixture).
- ``reasoningConfig``: Amazon Nova 2, ``{"reasoningConfig": {"type": "enabled",
  "maxReasoningEffort": …}}`` (LiteLLM, langchain-ai/docs#5239), ``{"type": "disabled"}`` to
  switch it off (Vercel's ``reasoningConfig.type``).
"""

from __future__ import annotations

from typing import Literal

__all__ = ["DIALECTS", "ConverseDialect", "converse_dialect"]

ConverseDialect = Literal["anthropic", "reasoning_effort", "reasoning", "reasoningConfig"]

DIALECTS: tuple[tuple[str, str, ConverseDialect], ...] = (
    ("openai", "gpt-oss", "reasoning_effort"),
    ("openai", "", "reasoning"),
    ("anthropic", "", "anthropic"),
    ("amazon", "nova", "reasoningConfig"),
)
"""``(vendor, model name prefix, dialect)``, first match wins. The vendor is the one the
Bedrock id names (``us.anthropic.…``, ``openai.gpt-oss-120b-1:0``,
``global.amazon.nova-2-lite-v1:0``: :func:`polythink.reasoning.ids.parse_model_id`), else the
provider of the model's registry entry; the name is the id's base model."""


def converse_dialect(model: str, registry_provider: str | None = None) -> ConverseDialect:
    """The reasoning dialect Converse takes for ``model`` (:data:`DIALECTS`), else
    ``reasoning_effort``; ``registry_provider`` is the provider its registry entry names."""
    from polythink.reasoning.ids import parse_model_id

    parsed = parse_model_id(None, model)
    vendor = parsed.vendor or registry_provider
    for wanted, prefix, dialect in DIALECTS:
        if vendor == wanted and parsed.base.startswith(prefix):
            return dialect
    return "reasoning_effort"
