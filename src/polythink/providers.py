"""Provider profiles: which wire each provider speaks, where, with which credentials.

A profile is static data. It says which transport (``wire``) serves the provider, its
default base URL, the environment variables holding its key, how the key is sent, and the
provider's dialect of the OpenAI Chat Completions wire where it has one (which reasoning
request fields it takes, which response field carries reasoning text, what it needs sent
back on the next turn). Decisions live elsewhere: reasoning in :mod:`polythink.reasoning`,
body building and parsing in :mod:`polythink.transports`.

Facts and their sources are in ``../shared/wire/WIRE.md`` §§1-6 (snapshots up to 2026-10).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from polythink.errors import InvalidInputError

__all__ = [
    "ALIASES",
    "AZURE_TIERS",
    "PROVIDERS",
    "VERTEX_TIERS",
    "WIRES",
    "ProviderProfile",
    "ReasoningWire",
    "TierWire",
    "canonical_provider",
    "get_provider",
    "local_base_url",
    "register_provider",
    "routed_profile",
    "suggest_provider",
]

ReasoningWire = Literal[
    "effort",  # top-level "reasoning_effort": tier (OpenAI, xAI, Groq, Mistral, MiniMax, Ollama)
    "openrouter",  # "reasoning": {"effort", "enabled"}
    "thinking_type",  # "thinking": {"type"} (+ "reasoning_effort"): DeepSeek, GLM, Kimi
    "qwen",  # "enable_thinking": bool, "thinking_budget": N (DashScope)
    "vllm",  # "chat_template_kwargs": {"enable_thinking"} + "reasoning_effort"
    "responses",  # "reasoning": {"effort"} (OpenAI Responses; "summary" is the caller's)
    "anthropic",  # "thinking": {...} (+ "output_config": {"effort"})
    "gemini",  # "generationConfig": {"thinkingConfig": {...}}
    "converse",  # Bedrock Converse: "additionalModelRequestFields" spelt per model vendor
]

WIRES: tuple[str, ...] = (
    "openai_chat",
    "openai_responses",
    "anthropic",
    "gemini",
    "bedrock",
    "bedrock_converse",
    "vertex",
    "vertex_anthropic",
)
"""The transports a profile may name as its ``wire`` (see :mod:`polythink.transports`)."""


@dataclass(frozen=True, slots=True)
class TierWire:
    """How one provider spells service tiers: data, one row per profile, so a cloud profile
    (Vertex AI, Azure) fills in its own without code.

    Attributes:
        values: polythink tier (``flex``, ``standard``, ``priority``, ``auto``) -> the value
            sent. A tier left out is not offered by the provider; a tier mapped to ``""`` is
            offered and sent as nothing (the provider's default: ``standard`` where the
            provider has no value for it, ``auto`` where it has no ``auto``).
        body_field: the body field the value goes in (``service_tier``; Gemini's
            ``serviceTier``), or ``None`` when it goes in a header.
        header: the header the value goes in (Vertex AI), or ``None``.
        served: where an answer reports the tier that served it: ``("body", "service_tier")``
            (OpenAI, Groq), ``("usage", "service_tier")`` (Anthropic),
            ``("header", "x-gemini-service-tier")`` (Gemini API), ``("usage", "trafficType")``
            (Vertex AI's ``usageMetadata``); ``None``: not reported.
        served_values: a reported value -> polythink's tier; a value not listed is kept as the
            provider sent it (``ultrafast``).
        no_capacity: the answers that mean "no capacity at this tier now" (not a rate limit):
            ``(status, error code)`` pairs, the code ``""`` for any body (Groq's 498).
        refuses_unsupported: a tier the model does not take is answered with a 400 naming the
            tier (Azure's flex on a model without it, "no fallback"), which the tier layer
            learns per endpoint; elsewhere such a 400 is raised as it comes.
        evidence: where these facts come from, and when they were read.
    """

    values: Mapping[str, str]
    body_field: str | None = "service_tier"
    header: str | None = None
    served: tuple[str, str] | None = ("body", "service_tier")
    served_values: Mapping[str, str] = field(default_factory=dict)
    no_capacity: tuple[tuple[int, str], ...] = ()
    refuses_unsupported: bool = False
    evidence: str = ""


_OPENAI_SERVED = {
    "default": "standard",
    "flex": "flex",
    "priority": "priority",
    "fast": "priority",
    "scale": "priority",
}
"""OpenAI's reported ``service_tier`` values: ``default`` is standard; Fast mode (renamed from
Priority on 2026-07-30) is reported as ``priority`` (SDK doc) or ``fast`` (measured on GPT-6 by
LiteLLM; CONTINUITY §7 C6); Scale Tier is committed priority capacity."""

OPENAI_TIERS = TierWire(
    values={"flex": "flex", "standard": "default", "priority": "priority", "auto": "auto"},
    served_values=_OPENAI_SERVED,
    no_capacity=((429, "resource_unavailable"),),
    evidence=(
        "service_tier auto|default|flex|scale|priority|fast (openai-python e43b4224, "
        "2026-08-21, ChatCompletion.service_tier, read 2026-12-04); flex answers 429 "
        "'Resource Unavailable', not charged, error.code resource_unavailable "
        "(developers.openai.com/api/docs/guides/flex-processing; code from third-party "
        "reports) — CONTINUITY.md §4"
    ),
)
OPENAI_RESPONSES_TIERS = TierWire(
    values=OPENAI_TIERS.values,
    served_values={**_OPENAI_SERVED, "ultrafast": "ultrafast"},
    no_capacity=OPENAI_TIERS.no_capacity,
    evidence=OPENAI_TIERS.evidence + "; Responses adds ultrafast (reported as such)",
)
GEMINI_TIERS = TierWire(
    values={"flex": "flex", "standard": "standard", "priority": "priority", "auto": ""},
    body_field="serviceTier",
    served=("header", "x-gemini-service-tier"),
    served_values={"standard": "standard", "flex": "flex", "priority": "priority"},
    evidence=(
        "top-level serviceTier flex|standard|priority (google-genai 66807187 models.py "
        "converters, 2026-08-21); priority over capacity is served at standard and the "
        "x-gemini-service-tier response header says so (ai.google.dev/gemini-api/docs/"
        "priority-inference); flex's failure code was not read — CONTINUITY.md §4, read "
        "2026-12-04"
    ),
)
ANTHROPIC_TIERS = TierWire(
    values={"standard": "standard_only", "auto": "auto"},
    served=("usage", "service_tier"),
    served_values={"standard": "standard", "priority": "priority", "batch": "batch"},
    evidence=(
        "service_tier auto|standard_only, usage.service_tier standard|priority|batch "
        "(anthropic-sdk-python 2.17.0 MessageCreateParams, Usage); service tiers are legacy, "
        "Priority Tier commitments can no longer be bought (platform.claude.com/docs/en/api/"
        "service-tiers) — CONTINUITY.md §4, read 2026-12-04"
    ),
)
GROQ_TIERS = TierWire(
    values={"flex": "flex", "standard": "on_demand", "priority": "performance", "auto": "auto"},
    served_values={"on_demand": "standard", "flex": "flex", "performance": "priority"},
    no_capacity=((498, ""),),
    evidence=(
        "service_tier performance (enterprise) | on_demand (default) | flex | auto; flex fails "
        "fast with HTTP 498 capacity_exceeded (console.groq.com/docs/service-tiers, "
        "flex-processing); whether answers report the tier is not documented — CONTINUITY.md "
        "§4, read 2026-12-04"
    ),
)
VERTEX_TIERS = TierWire(
    values={"flex": "flex", "standard": "", "priority": "priority", "auto": ""},
    body_field=None,
    header="X-Vertex-AI-LLM-Shared-Request-Type",
    served=("usage", "trafficType"),
    served_values={
        "ON_DEMAND": "standard",
        "ON_DEMAND_PRIORITY": "priority",
        "ON_DEMAND_FLEX": "flex",
    },
    evidence=(
        "header X-Vertex-AI-LLM-Shared-Request-Type: priority (docs.cloud.google.com/"
        "vertex-ai/generative-ai/docs/priority-paygo; flex from third-party reports), "
        "global endpoint only; usageMetadata.trafficType ON_DEMAND | ON_DEMAND_PRIORITY | "
        "ON_DEMAND_FLEX | PROVISIONED_THROUGHPUT (google-genai 66807187 TrafficType) — "
        "CONTINUITY.md §4, read 2026-12-04"
    ),
)
"""Vertex AI's spelling (the ``vertex`` profile's Gemini calls). The header is documented for the
``global`` endpoint only: a regional endpoint serves the call at standard and reports
``ON_DEMAND``, which the served tier then says."""
AZURE_TIERS = TierWire(
    values={"flex": "flex", "standard": "default", "priority": "priority", "auto": "auto"},
    served_values=_OPENAI_SERVED,
    no_capacity=OPENAI_TIERS.no_capacity,
    refuses_unsupported=True,
    evidence=(
        "service_tier flex (preview, 50% off) and priority processing on GlobalStandard / "
        "DataZoneStandard deployments; flex on a model without it answers 400 "
        "invalid_request_error with no fallback (learn.microsoft.com azure/foundry/openai "
        "how-to/flex-processing, concepts/priority-processing) — CONTINUITY.md §4, read "
        "2026-12-04"
    ),
)
"""Azure OpenAI's spelling (the ``azure`` and ``azure-responses`` profiles)."""


@dataclass(frozen=True, slots=True)
class ProviderProfile:
    """How to talk to one provider.

    Attributes:
        id: the provider id used in ``Source(provider, ...)``.
        wire: the transport that speaks for it: ``openai_chat``, ``openai_responses``,
            ``anthropic`` or ``gemini``.
        base_url: the default endpoint root (no trailing slash).
        api_key_env: environment variables tried in order for the key.
        base_url_env: the environment variable the provider's official SDK reads its base
            URL from, if any, and the path that SDK puts after it before the API's own
            (``OPENAI_BASE_URL`` as it is, ``ANTHROPIC_BASE_URL`` + ``/v1``,
            ``GOOGLE_GEMINI_BASE_URL`` + ``/v1beta``, ``GROQ_BASE_URL`` + ``/openai/v1``): a
            source with no ``base_url`` of its own goes there, as the SDK would (read from
            openai-python, anthropic-sdk-python, google-genai ``_base_url.py`` and
            groq-python ``_client.py``, 2026-12-04).
        key_required: whether a call to the default ``base_url`` needs a key.
        auth: how the key is sent: ``bearer`` (``Authorization: Bearer``), ``x-api-key``
            (Anthropic), ``x-goog-api-key`` (Gemini, Vertex express mode) or ``api-key``
            (Azure OpenAI).
        cloud: the cloud whose credentials sign or authorise calls when no key is given
            (:mod:`polythink.auth`): ``aws`` (SigV4 from the standard credential chain),
            ``google`` (OAuth tokens from Application Default Credentials) or ``azure``
            (Entra ID tokens); ``None`` for a provider reached with a key alone.
        vendor_routes: ``(vendor, profile id)`` pairs: a source of this provider whose model
            is of ``vendor`` (the id's vendor, else its registry entry's provider; ``*``
            for any other) is served by that profile instead, over its own wire (Claude on
            Bedrock through InvokeModel, other vendors through Converse). Empty: this
            profile serves every model.
        price_by_id: price a call by the source's model id before the model the answer
            names: Bedrock prices a cross-region profile (``global.``) and a regional one
            (``us.``, ``eu.`` …) differently, and only the id says which was called.
        reasoning_wire: the reasoning request dialect (see :data:`ReasoningWire`); ``None``
            when polythink does not know how this provider expresses reasoning.
        max_tokens_field: body field for the output ceiling (``max_completion_tokens`` on
            OpenAI, ``max_tokens`` elsewhere on the chat wire).
        default_max_tokens: output ceiling sent when the caller gives none and the wire
            requires one (Anthropic), else ``None``.
        reasoning_back: assistant-message field that sends reasoning text back on later
            turns (``reasoning_content`` for DeepSeek/GLM/Kimi, ``reasoning`` for Ollama), or
            ``None`` when the provider takes none (OpenAI rejects unknown message fields).
        reasoning_back_tool_turns_only: send ``reasoning_back`` only on assistant turns with
            tool calls (DeepSeek requires it there and ignores it elsewhere; Qwen documents it
            there only, see ``reasoning_back_everywhere_with``).
        reasoning_back_everywhere_with: a request field that, set to ``true`` (through
            ``extra_body``), makes the provider take ``reasoning_back`` on every assistant
            turn, not only on tool-call turns: DashScope's ``preserve_thinking``. Qwen's docs
            ask for the assistant's ``reasoning_content`` with the tool results ("function
            calling with thinking mode") and take it on other turns only with
            ``preserve_thinking: true`` ("preserve thinking in multi-turn";
            docs.qwencloud.com/developer-guides/text-generation/thinking, as cited by
            vercel/ai#20871, 2026-09-16; DashScope drops it otherwise, QwenLM/qwen-code#5637,
            2026-06-22).
        reasoning_back_required: every assistant tool-call turn must carry ``reasoning_back``
            while thinking is on; a turn that has no reasoning (for example one another
            provider made, before a failover) sends an empty string. DeepSeek answers 400
            "Missing reasoning_content field" otherwise (DS-DOC thinking_mode, 2026;
            the empty-string fallback as used by SillyTavern PR #5545, 2026-04-28).
        reasoning_back_tool_exchange: ``reasoning_back`` goes on every assistant turn of a
            tool exchange (the turns between two user messages when one of them called a
            tool), the answer after the tool results too, not only on the tool-call turns:
            DeepSeek, "if there was a tool call between two user messages, it must be passed
            back in all subsequent requests" (DS, CONTINUITY.md §3.3).
        reasoning_format: the ``Message.reasoning_format`` of the turns this provider's answers
            make, whose opaque items it accepts back verbatim (``openrouter`` for
            ``reasoning_details``); ``None``: the turns it makes carry the profile's id, which
            tells them from others' (it takes no opaque items back).
            Reasoning text of a turn of another format (or none) that the wire does not take
            back is left out with a note in the response's warnings; a turn of this format
            goes as the provider's round trip says (DeepSeek and Qwen take ``reasoning_content``
            back on tool-call turns only), without one.
        inline_think_tags: the provider may put reasoning inline in ``content`` as
            ``<think>…</think>`` (Groq ``reasoning_format: raw``, vLLM without a parser).
        stream_usage: send ``stream_options: {"include_usage": true}`` on streams (not to
            Mistral, which refuses the field and sends streamed usage anyway).
        encrypted_reasoning: on the Responses wire, ask for ``reasoning.encrypted_content``
            (``include``) on models that reason, so reasoning items can be sent back on later
            turns without server-side state. OpenAI answers 400 "Encrypted content is not
            supported with this model" when it is asked of a model that does not reason
            (ShishirPatil/gorilla#1148, 2025-08), so it is never sent to one.
        strict_sampling: the provider answers 400 to sampling parameters a model does not
            take (OpenAI, Anthropic), so polythink refuses or drops them first (see
            ``Capability.sampling``); other providers ignore them.
        completion_counts_reasoning: whether the provider's ``completion_tokens`` (Responses
            ``output_tokens``) include the reasoning tokens, as documented: ``True`` on OpenAI
            ("like reasoning tokens, these tokens are still counted in the total completion
            tokens", ``CompletionUsage`` in ``openai_openapi.yaml`` 2026-08-21; Responses
            ``output_tokens_details.reasoning_tokens`` likewise a part of ``output_tokens``);
            ``False`` on xAI, whose reasoning "will be counted separately from
            completion_tokens, but will be counted in the total_tokens"
            (docs.x.ai/docs/key-information/consumption-and-rate-limits, quoted in
            vercel/ai#12425, 2026-02-11; grok-4.20 usage 10120 + 1499 + 2809 = 14428 total in
            Wei-Shaw/sub2api#5771, 2026-08-18); ``None``: not documented, decided per answer
            from ``total_tokens`` (:func:`polythink.transports.base.output_with_reasoning`).
            ``Usage.output_tokens`` includes reasoning whichever it is.
        ceiling_covers_reasoning: whether the output ceiling sent (``max_completion_tokens``,
            ``max_output_tokens``, ``max_tokens``, ``maxOutputTokens``) bounds the reasoning
            tokens too, as documented: OpenAI ("upper bound for the number of tokens that can
            be generated for a completion, including visible output tokens and reasoning
            tokens", ``openai_openapi.yaml``), Anthropic (``budget_tokens`` must be below
            ``max_tokens``), Gemini and OpenRouter (a reasoning budget is a share of the
            ceiling, WIRE.md §5.5). A reported output above such a ceiling is impossible and
            is counted as the ceiling (:func:`polythink.reasoning.observe.bounded_usage`);
            elsewhere only the model's maximum output bounds it.
        thinking_refuses_forced_tool_choice: while the model thinks, the provider refuses a
            ``tool_choice`` that forces a call (``required`` or a named function): DeepSeek
            V4, 400 "Thinking mode does not support this tool_choice", accepted once
            ``thinking.type`` is ``disabled`` (deepseek-ai/DeepSeek-V3#1376, 2026-08-21;
            api-docs.deepseek.com quick_start/agent_integrations, cited in
            mozilla-ai/any-llm#1384, 2026-09-09); DashScope, 400 "The tool_choice parameter
            does not support being set to required or object in thinking mode"
            (cloudwego/eino#994, 2026-04-24, qwen3.5-plus; agentscope-ai/agentscope#1608,
            2026-09-07, qwen3.8-max: the same call passes with thinking off). The Chat
            transport refuses such a call before sending, or drops ``tool_choice`` (the
            provider's default, ``auto``) with ``drop_params``.
        prompt_cache: how a :class:`~polythink.types.PromptCache` marker is spelt on this
            provider's OpenAI-shaped wire: ``key`` sends ``prompt_cache_key`` and
            ``prompt_cache_retention`` (OpenAI Chat and Responses,
            ``openai_openapi.yaml`` 2026-08-21; OpenRouter passes them to OpenAI);
            ``cache_control`` sends Anthropic's top-level ``cache_control`` breakpoint
            (OpenRouter, for the Anthropic models behind it: openrouter.ai/docs
            ``AnthropicCacheControlDirective``, read 2026-12-01). Empty: the marker sends
            nothing (the provider caches prefixes on its own, or takes no such field).
        catalogue: the provider id the capability registry lists this provider's models
            under, when it is another one (``openai-responses`` serves ``openai``'s models);
            ``None`` = its own id. Lifecycle dates of an entry apply where it is served.
        responses_profile: the profile that reaches the Responses API with the same key and
            host (``openai`` -> ``openai-responses``), so a call a model takes only there
            (``Capability.chat_tools``) can be sent there; ``None`` = no such route.
        api_versions: the API versions a source may pin (``Source.api_version``), the default
            first; empty = the provider has no version a client chooses.
        thinking_displays: the ``thinking.display`` values a source may ask for
            (``Source.thinking_display``); empty = not on this wire.
        reasoning_modes: whether a source may set ``reasoning.mode``
            (``Source.reasoning_mode``): the Responses wire, or a profile with a
            ``responses_profile`` that sends such calls there.
        per_call_instructions: where per-call instructions (``system_suffix``, a
            structured-output instruction) go on this provider, unless the model's capability
            says otherwise (:attr:`~polythink.reasoning.Capability.per_call_instructions`,
            used where the provider serves the model natively): ``system_message``, a
            system message after the conversation (OpenAI Chat and Responses: the API takes
            system and developer messages at any position); ``user_turn``, a user message
            after it (or more text in the last user message): every chat template takes one,
            where a system message that is not first may be refused (chat templates that
            raise "System message must be at the beginning"); ``system``, the system prompt
            itself, edited every call (Mistral, which refuses a user message right after a
            tool result: 400 "Unexpected role 'user' after role 'tool'",
            ``invalid_request_message_order``, NousResearch/hermes-agent#20154, 2026-05-05,
            and a system message that is not first). Anthropic keeps each
            call's instructions in place on later calls (:attr:`~polythink.Message.
            instructions`); the other wires send only the newest, after the conversation.
        service_tiers: how the provider spells service tiers (:class:`TierWire`); ``None``:
            it has none, and a call's tier sends nothing (see
            :func:`polythink.reasoning.tiers.resolve_tier`).
        batches: the provider's batch API, which :mod:`polythink.batch` speaks: ``openai``
            (a JSONL file uploaded to ``/files``, then ``/batches``), ``anthropic`` (Message
            Batches) or ``gemini`` (``batchGenerateContent`` with inlined requests); ``None``:
            none.
    """

    id: str
    wire: str
    base_url: str
    api_key_env: tuple[str, ...] = ()
    base_url_env: tuple[str, str] | None = None
    key_required: bool = True
    auth: Literal["bearer", "x-api-key", "x-goog-api-key", "api-key"] = "bearer"
    reasoning_wire: ReasoningWire | None = "effort"
    max_tokens_field: str = "max_tokens"
    default_max_tokens: int | None = None
    reasoning_back: str | None = None
    reasoning_back_tool_turns_only: bool = False
    reasoning_back_everywhere_with: str | None = None
    reasoning_back_required: bool = False
    reasoning_format: str | None = None
    inline_think_tags: bool = False
    stream_usage: bool = True
    strict_sampling: bool = False
    encrypted_reasoning: bool = False
    prompt_cache: tuple[str, ...] = ()
    catalogue: str | None = None
    responses_profile: str | None = None
    api_versions: tuple[str, ...] = ()
    thinking_displays: tuple[str, ...] = ()
    reasoning_modes: bool = False
    completion_counts_reasoning: bool | None = None
    ceiling_covers_reasoning: bool = False
    thinking_refuses_forced_tool_choice: bool = False
    per_call_instructions: Literal["system_message", "user_turn", "system"] = "user_turn"
    reasoning_back_tool_exchange: bool = False
    service_tiers: TierWire | None = None
    batches: Literal["openai", "anthropic", "gemini"] | None = None
    cloud: Literal["aws", "google", "azure"] | None = None
    vendor_routes: tuple[tuple[str, str], ...] = ()
    price_by_id: bool = False

    @property
    def serves(self) -> str:
        """The provider id the registry lists this provider's models under."""
        return self.catalogue or self.id


PROVIDERS: dict[str, ProviderProfile] = {
    p.id: p
    for p in (
        ProviderProfile(
            "openai",
            "openai_chat",
            "https://api.openai.com/v1",
            ("OPENAI_API_KEY",),
            base_url_env=("OPENAI_BASE_URL", ""),
            max_tokens_field="max_completion_tokens",
            strict_sampling=True,
            prompt_cache=("key",),
            responses_profile="openai-responses",
            reasoning_modes=True,
            completion_counts_reasoning=True,
            ceiling_covers_reasoning=True,
            per_call_instructions="system_message",
            service_tiers=OPENAI_TIERS,
            batches="openai",
        ),
        ProviderProfile(
            "openai-responses",
            "openai_responses",
            "https://api.openai.com/v1",
            ("OPENAI_API_KEY",),
            base_url_env=("OPENAI_BASE_URL", ""),
            reasoning_wire="responses",
            max_tokens_field="max_output_tokens",
            reasoning_format="openai-responses",
            encrypted_reasoning=True,
            strict_sampling=True,
            prompt_cache=("key",),
            catalogue="openai",
            reasoning_modes=True,
            completion_counts_reasoning=True,
            ceiling_covers_reasoning=True,
            per_call_instructions="system_message",
            service_tiers=OPENAI_RESPONSES_TIERS,
            batches="openai",
        ),
        ProviderProfile(
            "openrouter-responses",
            "openai_responses",
            "https://openrouter.ai/api/v1",
            ("OPENROUTER_API_KEY",),
            reasoning_wire="responses",
            max_tokens_field="max_output_tokens",
            reasoning_format="openrouter-responses",
            prompt_cache=("key",),
            catalogue="openrouter",
            ceiling_covers_reasoning=True,
        ),
        ProviderProfile(
            "anthropic",
            "anthropic",
            "https://api.anthropic.com/v1",
            ("ANTHROPIC_API_KEY",),
            base_url_env=("ANTHROPIC_BASE_URL", "/v1"),
            auth="x-api-key",
            reasoning_wire="anthropic",
            default_max_tokens=4096,
            reasoning_format="anthropic",
            strict_sampling=True,
            # 2026-10-21 first: what the official SDK majors released that day send, and the
            # version the migration guide recommends (CURRENT.md §1.1, A-MIG).
            api_versions=("2026-10-21", "2023-06-01"),
            # ThinkingConfigAdaptive/Enabled.display in the SDK (ANT-SDK 009b0353); "updates"
            # is a beta value (A-FABLE51) and goes through extra_body with its header.
            thinking_displays=("summarized", "omitted"),
            ceiling_covers_reasoning=True,
            service_tiers=ANTHROPIC_TIERS,
            batches="anthropic",
        ),
        ProviderProfile(
            "gemini",
            "gemini",
            "https://generativelanguage.googleapis.com/v1beta",
            ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
            base_url_env=("GOOGLE_GEMINI_BASE_URL", "/v1beta"),
            auth="x-goog-api-key",
            reasoning_wire="gemini",
            max_tokens_field="maxOutputTokens",
            reasoning_format="gemini",
            ceiling_covers_reasoning=True,
            service_tiers=GEMINI_TIERS,
            batches="gemini",
        ),
        # Amazon Bedrock: Claude through InvokeModel (the Messages body with
        # "anthropic_version" and "anthropic_beta" in it, the model in the path), every other
        # vendor through Converse. Auth: a Bedrock API key as a bearer token
        # (AWS_BEARER_TOKEN_BEDROCK, which botocore also reads), else SigV4 signing with the
        # standard credential chain (CLOUDS.md §1.2, §1.3, §1.6, §1.10).
        ProviderProfile(
            "bedrock",
            "bedrock",
            "https://bedrock-runtime.{region}.amazonaws.com",
            ("AWS_BEARER_TOKEN_BEDROCK",),
            key_required=False,
            reasoning_wire="anthropic",
            default_max_tokens=4096,
            # Thinking signatures are bound to the AWS account that made them (CONTINUITY.md
            # §1.8): a Bedrock turn's blocks go back to Bedrock only.
            reasoning_format="bedrock",
            strict_sampling=True,
            # The body's anthropic_version: what the AWS docs, boto3 users and the Anthropic
            # SDK's Bedrock client before 2.x send; the ARN-versioned models reject 2026-10-21
            # there (CLOUDS.md §1.2, CURRENT.md §1.5).
            api_versions=("bedrock-2023-05-31",),
            thinking_displays=("summarized", "omitted"),
            cloud="aws",
            vendor_routes=(("anthropic", "bedrock"), ("*", "bedrock-converse")),
            price_by_id=True,
        ),
        ProviderProfile(
            "bedrock-converse",
            "bedrock_converse",
            "https://bedrock-runtime.{region}.amazonaws.com",
            ("AWS_BEARER_TOKEN_BEDROCK",),
            key_required=False,
            reasoning_wire="converse",
            reasoning_format="bedrock-converse",
            cloud="aws",
            price_by_id=True,
        ),
        # Vertex AI: Gemini through generateContent, Claude through rawPredict (the Messages
        # body with "anthropic_version": "vertex-2023-10-16"). Auth: OAuth tokens from
        # Application Default Credentials; an express-mode API key for Gemini
        # (CLOUDS.md §2.1-§2.4).
        ProviderProfile(
            "vertex",
            "vertex",
            "https://aiplatform.googleapis.com/v1/projects/{project}/locations/{location}",
            ("GOOGLE_API_KEY",),
            key_required=False,
            auth="x-goog-api-key",
            reasoning_wire="gemini",
            max_tokens_field="maxOutputTokens",
            # Thought signatures are not portable between the Gemini API and Vertex
            # (CLOUDS.md §2.2): a Vertex turn's parts go back to Vertex only.
            reasoning_format="vertex",
            cloud="google",
            vendor_routes=(("anthropic", "vertex-anthropic"),),
            service_tiers=VERTEX_TIERS,
        ),
        ProviderProfile(
            "vertex-anthropic",
            "vertex_anthropic",
            "https://aiplatform.googleapis.com/v1/projects/{project}/locations/{location}",
            key_required=False,
            reasoning_wire="anthropic",
            default_max_tokens=4096,
            reasoning_format="vertex-anthropic",
            strict_sampling=True,
            api_versions=("vertex-2023-10-16",),
            thinking_displays=("summarized", "omitted"),
            cloud="google",
        ),
        # Azure OpenAI and Foundry: the v1 API (model = the deployment name) or the
        # deployments API with a dated api-version; an api-key header or Entra ID tokens
        # (CLOUDS.md §3.1).
        ProviderProfile(
            "azure",
            "openai_chat",
            "https://{resource}.openai.azure.com/openai/v1",
            ("AZURE_OPENAI_API_KEY", "AZURE_API_KEY"),
            key_required=False,
            auth="api-key",
            max_tokens_field="max_completion_tokens",
            strict_sampling=True,
            responses_profile="azure-responses",
            completion_counts_reasoning=True,
            api_versions=("v1",),
            cloud="azure",
            service_tiers=AZURE_TIERS,
        ),
        ProviderProfile(
            "azure-responses",
            "openai_responses",
            "https://{resource}.openai.azure.com/openai/v1",
            ("AZURE_OPENAI_API_KEY", "AZURE_API_KEY"),
            key_required=False,
            auth="api-key",
            reasoning_wire="responses",
            max_tokens_field="max_output_tokens",
            # Encrypted reasoning is sealed by the resource that made it.
            reasoning_format="azure-responses",
            encrypted_reasoning=True,
            strict_sampling=True,
            completion_counts_reasoning=True,
            api_versions=("v1",),
            cloud="azure",
            service_tiers=AZURE_TIERS,
        ),
        ProviderProfile(
            "openrouter",
            "openai_chat",
            "https://openrouter.ai/api/v1",
            ("OPENROUTER_API_KEY",),
            reasoning_wire="openrouter",
            # "Pass back message.reasoning ... or message.reasoning_details unmodified"
            # (WIRE.md §5.5): the details when the turn has them, else the text.
            reasoning_back="reasoning",
            reasoning_format="openrouter",
            prompt_cache=("key", "cache_control"),
            ceiling_covers_reasoning=True,
        ),
        ProviderProfile(
            "deepseek",
            "openai_chat",
            "https://api.deepseek.com",
            ("DEEPSEEK_API_KEY",),
            reasoning_wire="thinking_type",
            reasoning_back="reasoning_content",
            reasoning_back_tool_turns_only=True,
            reasoning_back_required=True,
            reasoning_back_tool_exchange=True,
            reasoning_format="deepseek",
            thinking_refuses_forced_tool_choice=True,
        ),
        ProviderProfile(
            "qwen",
            "openai_chat",
            "https://dashscope-intl.aliyuncs.com/compatible-mode/v1",
            ("DASHSCOPE_API_KEY", "QWEN_API_KEY"),
            reasoning_wire="qwen",
            reasoning_back="reasoning_content",
            reasoning_back_tool_turns_only=True,
            reasoning_back_everywhere_with="preserve_thinking",
            reasoning_format="qwen",
            thinking_refuses_forced_tool_choice=True,
        ),
        ProviderProfile(
            "glm",
            "openai_chat",
            "https://open.bigmodel.cn/api/paas/v4",
            ("ZHIPUAI_API_KEY", "ZAI_API_KEY", "GLM_API_KEY"),
            reasoning_wire="thinking_type",
            reasoning_back="reasoning_content",
        ),
        ProviderProfile(
            "kimi",
            "openai_chat",
            "https://api.moonshot.ai/v1",
            ("MOONSHOT_API_KEY", "KIMI_API_KEY"),
            reasoning_wire="thinking_type",
            reasoning_back="reasoning_content",
            reasoning_back_required=True,
        ),
        ProviderProfile(
            "minimax",
            "openai_chat",
            "https://api.minimax.io/v1",
            ("MINIMAX_API_KEY",),
        ),
        ProviderProfile(
            "xai",
            "openai_chat",
            "https://api.x.ai/v1",
            ("XAI_API_KEY",),
            completion_counts_reasoning=False,
        ),
        ProviderProfile(
            "groq",
            "openai_chat",
            "https://api.groq.com/openai/v1",
            ("GROQ_API_KEY",),
            base_url_env=("GROQ_BASE_URL", "/openai/v1"),
            inline_think_tags=True,
            service_tiers=GROQ_TIERS,
        ),
        # Mistral's chat request schema has no stream_options and refuses fields it does not
        # define (422 "Extra inputs are not permitted"); its last streamed chunk carries
        # usage unasked (https://docs.mistral.ai/api/, chat completions, as published in 2025).
        ProviderProfile(
            "mistral",
            "openai_chat",
            "https://api.mistral.ai/v1",
            ("MISTRAL_API_KEY",),
            stream_usage=False,
            per_call_instructions="system",
        ),
        ProviderProfile(
            "vllm",
            "openai_chat",
            "http://127.0.0.1:8000/v1",
            ("VLLM_API_KEY",),
            key_required=False,
            reasoning_wire="vllm",
            inline_think_tags=True,
        ),
        ProviderProfile(
            "ollama",
            "openai_chat",
            "http://127.0.0.1:11434/v1",
            ("OLLAMA_API_KEY",),
            key_required=False,
            reasoning_back="reasoning",
        ),
    )
}
"""Built-in profiles by provider id."""


ALIASES: dict[str, str] = {
    "aws-bedrock": "bedrock",
    "amazon-bedrock": "bedrock",
    "bedrock-runtime": "bedrock",
    "bedrock-invoke": "bedrock",
    "aws-bedrock-converse": "bedrock-converse",
    "vertex-ai": "vertex",
    "vertexai": "vertex",
    "google-vertex": "vertex",
    "google-vertex-ai": "vertex",
    "gcp-vertex": "vertex",
    "vertex-ai-anthropic": "vertex-anthropic",
    "vertex-claude": "vertex-anthropic",
    "google-vertex-anthropic": "vertex-anthropic",
    "azure-openai": "azure",
    "azure-foundry": "azure",
    "azure-ai-foundry": "azure",
    "microsoft-foundry": "azure",
    "foundry": "azure",
    "azure-ai": "azure",
    "azure-openai-responses": "azure-responses",
}
"""Other names users give the cloud providers (peers' spellings: LiteLLM's ``vertex_ai``,
``azure_ai``; Vercel's ``amazon-bedrock``, ``google-vertex``), accepted as their id. Like
ids they are matched exactly; a near miss (``Vertex_AI``) is answered with a suggestion."""


def canonical_provider(name: str) -> str:
    """The provider id ``name`` stands for: itself when it is an id, the id of an alias
    (:data:`ALIASES`), else ``name`` unchanged (names are matched exactly, as ids are;
    :func:`suggest_provider` finds the near ones)."""
    if name in PROVIDERS:
        return name
    return ALIASES.get(name, name)


def local_base_url(root: str, provider: str | ProviderProfile) -> str:
    """The base URL of ``provider`` on a server that serves every provider under a path of
    its own, as polythink's simulator lays them out: ``{root}/{provider}/v1``, and an Azure
    profile's ``{root}/{provider}/openai/v1`` (the resource's ``/openai/v1``).

    ``root`` is ``scheme://host:port`` without a trailing ``/``; what ``POLYTHINK_BASE_URL_ROOT``
    and ``polythink demo --base-url-root`` name.

    Raises:
        ValueError: an unknown provider (:func:`get_provider`).
    """
    profile = get_provider(provider)
    if profile.cloud == "azure":
        return f"{root}/{profile.id}/openai/v1"
    return f"{root}/{profile.id}/v1"


def get_provider(provider: str | ProviderProfile) -> ProviderProfile:
    """Return the profile for a provider id or alias (or the profile itself).

    Raises:
        ValueError: for an unknown id; the message lists the known ones.
    """
    if isinstance(provider, ProviderProfile):
        return provider
    profile = PROVIDERS.get(provider) or PROVIDERS.get(ALIASES.get(provider, ""))
    if profile is None:
        raise InvalidInputError(
            f"unknown provider {provider!r}{suggest_provider(provider)}; known providers: "
            f"{', '.join(PROVIDERS)} (or register one with polythink.providers.register_provider)"
        )
    return profile


def suggest_provider(name: object) -> str:
    """``" (did you mean 'x'?)"`` for the provider id nearest to ``name``, or ``""``.

    Nearness is :func:`difflib.get_close_matches` (ratio 0.6 or more) on the lower-cased
    name, over the ids and their aliases (:data:`ALIASES`, suggested as the id they stand
    for), so ``"opneai"``, ``"Anthropic"``, ``"bedrok"`` and ``"azure-openia"`` find theirs.
    A name that holds an id or an alias whole (``"aws-bedrock-claude"``) suggests it.
    """
    if not isinstance(name, str):
        return ""
    import difflib  # only for a name that is not known

    folded = "-".join(name.strip().lower().replace("_", "-").split())
    names = {**{pid: pid for pid in PROVIDERS}, **ALIASES}
    close = difflib.get_close_matches(folded, list(names), n=1)
    if not close:
        held = [alias for alias in names if len(alias) > 3 and alias in folded]
        close = sorted(held, key=len, reverse=True)[:1]
    return f" (did you mean {names[close[0]]!r}?)" if close else ""


def routed_profile(profile: ProviderProfile, vendor: str | None) -> ProviderProfile:
    """The profile that serves a model of ``vendor`` for a source of ``profile``: the
    ``vendor_routes`` entry of that vendor, else its ``*`` entry, else ``profile`` itself
    (``vendor`` ``None``: the ``*`` entry)."""
    routes = dict(profile.vendor_routes)
    target = routes.get(vendor or "*", routes.get("*"))
    return PROVIDERS[target] if target is not None else profile


def register_provider(profile: ProviderProfile) -> None:
    """Add or replace a provider profile, e.g. an OpenAI-compatible gateway of your own.

    Raises:
        ValueError: when ``profile.wire`` is not one of polythink's transports.
    """
    if profile.wire not in WIRES:
        raise InvalidInputError(f"unknown wire {profile.wire!r}; accepted: {', '.join(WIRES)}")
    PROVIDERS[profile.id] = profile
