"""Model id forms: every form a provider documents is read back to the model it names.

Each row cites the page the form comes from (read 2026-12-04 unless said) and states the
native id (``ModelId.model``), the base model (``ModelId.base``) and the registry entry the id
finds. Forms read by their shape alone (``provider=None``) are also read with their provider.
"""

from __future__ import annotations

import genai_prices
import pytest

from polythink.pricing import price
from polythink.reasoning import get_capability, normalise_model_name
from polythink.reasoning.families import family_of
from polythink.reasoning.ids import base_model_id, lookup_keys, model_key, parse_model_id
from polythink.types import Effort, Usage

# (provider, id, native model, base model, registry entry or None); "=" repeats the column
# before it.
_FORMS = [
    # Amazon Bedrock. Model ids: docs.aws.amazon.com/bedrock/latest/userguide/
    # models-supported.html (pt_br/it_it/es_es copies) and what-is-bedrock.html; cross-Region
    # profile prefixes: AWS CDK CrossRegionInferenceProfileRegion (GLOBAL US EU APAC JP AU
    # US_GOV); ARN patterns: APIReference/API_InferenceProfileModel.html and
    # API_InferenceProfileSummary.html; CLOUDS.md §1.8.
    ("bedrock", "anthropic.claude-opus-4-7", "claude-opus-4-7", "=", "="),
    (
        "bedrock",
        "anthropic.claude-haiku-4-5-20251001-v1:0",
        "claude-haiku-4-5-20251001",
        "claude-haiku-4-5",
        "=",
    ),
    ("bedrock", "anthropic.claude-opus-4-6-v1", "claude-opus-4-6", "=", "="),
    (
        "bedrock",
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "claude-sonnet-4-5-20250929",
        "claude-sonnet-4-5",
        "=",
    ),
    ("bedrock", "eu.anthropic.claude-sonnet-4-6", "claude-sonnet-4-6", "=", "="),
    (
        "bedrock",
        "apac.anthropic.claude-haiku-4-5-20251001-v1:0",
        "claude-haiku-4-5-20251001",
        "claude-haiku-4-5",
        "=",
    ),
    ("bedrock", "global.anthropic.claude-opus-4-8", "claude-opus-4-8", "=", "="),
    ("bedrock", "jp.anthropic.claude-sonnet-5", "claude-sonnet-5", "=", "="),
    (
        "bedrock",
        "us-gov.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "claude-sonnet-4-5-20250929",
        "claude-sonnet-4-5",
        "=",
    ),
    ("bedrock", "openai.gpt-oss-120b-1:0", "gpt-oss-120b", "=", "="),
    ("bedrock", "us.openai.gpt-6-luna", "gpt-6-luna", "=", "="),
    ("bedrock", "qwen.qwen3-32b-v1:0", "qwen3-32b", "=", "="),
    ("bedrock", "deepseek.r1-v1:0", "deepseek-r1", "=", None),
    ("bedrock", "moonshot.kimi-k2-thinking", "kimi-k2-thinking", "=", "="),
    (
        "bedrock",
        "anthropic.claude-3-sonnet-20240229-v1:0:28k",
        "claude-3-sonnet-20240229",
        "claude-3-sonnet",
        None,
    ),
    (
        None,
        "arn:aws:bedrock:us-west-2::foundation-model/anthropic.claude-3-5-sonnet-20241022-v2:0",
        "claude-3-5-sonnet-20241022",
        "claude-3-5-sonnet",
        None,
    ),
    (
        None,
        "arn:aws:bedrock:us-east-1:123456789012:inference-profile/"
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "claude-sonnet-4-5-20250929",
        "claude-sonnet-4-5",
        "=",
    ),
    (
        "bedrock",
        "arn:aws-us-gov:bedrock:us-gov-west-1:123456789012:inference-profile/"
        "us-gov.anthropic.claude-opus-4-7",
        "claude-opus-4-7",
        "=",
        "=",
    ),
    # Claude on Vertex AI: "claude-sonnet-4-5@20250929", "claude-3-5-sonnet-v2@20241022"
    # (platform.claude.com/docs/ru/build-with-claude/claude-on-vertex-ai); newer models have no
    # @version (CLOUDS.md §2.3); publisher paths (CLOUDS.md §2.1); MaaS ids end in -maas
    # (docs.cloud.google.com/vertex-ai/generative-ai/docs/open-models/use-maas).
    (
        "vertex",
        "claude-sonnet-4-5@20250929",
        "claude-sonnet-4-5-20250929",
        "claude-sonnet-4-5",
        "=",
    ),
    ("vertex", "claude-opus-4-1@20250805", "claude-opus-4-1-20250805", "claude-opus-4-1", "="),
    ("vertex", "claude-opus-4-7@default", "claude-opus-4-7", "=", "="),
    (
        "vertex",
        "claude-3-5-sonnet-v2@20241022",
        "claude-3-5-sonnet-v2-20241022",
        "claude-3-5-sonnet-v2",
        None,
    ),
    (
        "vertex",
        "publishers/anthropic/models/claude-haiku-4-5@20251001",
        "claude-haiku-4-5-20251001",
        "claude-haiku-4-5",
        "=",
    ),
    (
        "vertex",
        "projects/p/locations/global/publishers/google/models/gemini-3.8-flash",
        "gemini-3.8-flash",
        "=",
        "=",
    ),
    ("vertex", "openai/gpt-oss-120b-maas", "gpt-oss-120b-maas", "gpt-oss-120b", "="),
    # Ollama: [host/][namespace/]model[:tag], tag = size, variant, quantisation
    # (www.mintlify.com/ollama/ollama/models; metacpan.org/pod/AI::Ollama::Model).
    ("ollama", "gpt-oss:120b", "gpt-oss-120b", "=", "="),
    ("ollama", "gpt-oss:20b-cloud", "gpt-oss-20b", "=", "="),
    ("ollama", "qwen3:32b", "qwen3-32b", "=", "="),
    ("ollama", "qwen3:32b-q4_K_M", "qwen3-32b", "=", "="),
    ("ollama", "registry.ollama.ai/library/qwen3:32b", "qwen3-32b", "=", "="),
    (
        "ollama",
        "qwen3:30b-a3b-instruct-2507-q4_K_M",
        "qwen3-30b-a3b-instruct-2507",
        "qwen3-30b-a3b-instruct",
        None,
    ),
    ("ollama", "llama2:70b", "llama2-70b", "=", None),
    # OpenAI fine-tunes: ft:<base>:<org>:<suffix>:<id> (leeroopedia.com Openai_python
    # Fine_Tuned_Model_Usage, updated 2026-02-15); Mistral's use the same wrapper.
    (
        "openai",
        "ft:gpt-4o-mini-2024-07-18:acme:support:9xYzAb",
        "gpt-4o-mini-2024-07-18",
        "gpt-4o-mini",
        "=",
    ),
    ("openai", "ft:gpt-4.1-2025-04-14:acme::BcD123", "gpt-4.1-2025-04-14", "gpt-4.1", "="),
    ("mistral", "ft:open-mistral-7b:587a6b29:20240514:7e773925", "open-mistral-7b", "=", None),
    # Dates beyond ISO: xAI MMDD (grok-4-0709, grok-4.20-0309-reasoning: docs.x.ai/developers/
    # models via braintrust-proxy#565), Mistral YYMM and YY-MM (mistral-small-2603,
    # mistral-medium-3-5-26-04: docs.mistral.ai/guides/model-selection, braintrust-proxy#505),
    # ISO and compact dates (OpenAI, Anthropic model pages), Gemini MM-YYYY and -001.
    ("xai", "grok-4-0709", "=", "grok-4", "="),
    ("xai", "grok-4.20-0309-reasoning", "=", "grok-4.20-reasoning", "="),
    ("xai", "grok-4.20-0309-non-reasoning", "=", "grok-4.20-non-reasoning", "="),
    ("mistral", "mistral-small-2603", "=", "mistral-small", "mistral-small-latest"),
    ("mistral", "mistral-medium-3-5-26-04", "=", "mistral-medium-3-5", "="),
    ("openai", "gpt-5-2025-08-07", "=", "gpt-5", "="),
    ("anthropic", "claude-sonnet-4-5-20250929", "=", "claude-sonnet-4-5", "="),
    ("gemini", "gemini-2.5-flash-preview-09-2025", "=", "gemini-2.5-flash", "="),
    (
        "gemini",
        "models/gemini-2.5-flash-lite-001",
        "gemini-2.5-flash-lite-001",
        "gemini-2.5-flash-lite",
        "=",
    ),
    # -latest aliases (Mistral release note 2024-02-26; Anthropic and Gemini model pages;
    # docs.x.ai <model>-latest).
    ("anthropic", "claude-3-7-sonnet-latest", "=", "claude-3-7-sonnet", "="),
    ("xai", "grok-4.5-latest", "=", "grok-4.5", "="),
    ("mistral", "mistral-small-latest", "=", "mistral-small", "mistral-small-latest"),
    ("qwen", "qwen-plus-latest", "=", "qwen-plus", "qwen-plus-latest"),
    # Variants sharing the base model's rules: MiniMax and Kimi -highspeed (vercel.com/
    # ai-gateway/models/minimax-m2.5-highspeed/faq: "None" quality difference), OpenRouter's
    # Claude -fast slugs (CURRENT.md §2.4), Gemini -customtools and -preview
    # (ai.google.dev/gemini-api/docs/models/gemini-3.1-pro-preview), a Gemini domain edition.
    ("minimax", "MiniMax-M2.7-highspeed", "=", "MiniMax-M2.7", "="),
    ("kimi", "kimi-k3.1-pro-highspeed", "=", "kimi-k3.1-pro", "="),
    (
        "openrouter",
        "anthropic/claude-opus-4.8-fast",
        "claude-opus-4.8-fast",
        "claude-opus-4.8",
        "claude-opus-4-8",
    ),
    ("gemini", "gemini-3.1-pro-preview-customtools", "=", "gemini-3.1-pro", "="),
    ("gemini", "gemini-4-argon-cyber-permissive", "=", "gemini-4-argon", "="),
    # Gateways: a vendor/ prefix, OpenRouter routing variants (:nitro … share the base
    # model's metadata) and catalog variants (openrouter.ai/docs/guides/routing/
    # model-variants/overview.md), OpenRouter's ~ aliases.
    ("openrouter", "openai/gpt-5.2:nitro", "gpt-5.2", "=", "="),
    ("openrouter", "openai/gpt-oss-20b:free", "gpt-oss-20b", "=", "="),
    ("openrouter", "~z-ai/glm-5.3", "glm-5.3", "=", "="),
    ("groq", "qwen/qwen3-32b", "qwen3-32b", "=", "="),
]


def _expand(row: tuple[str | None, ...]) -> tuple[str | None, ...]:
    values = list(row)
    for i in range(2, len(values)):
        if values[i] == "=":
            values[i] = values[i - 1]
    return tuple(values)


FORMS = [_expand(row) for row in _FORMS]


@pytest.mark.parametrize(("provider", "raw", "model", "base", "entry"), FORMS)
def test_every_documented_form_reads_back_to_its_model(
    provider: str | None, raw: str, model: str, base: str, entry: str | None
) -> None:
    parsed = parse_model_id(provider, raw)
    assert (parsed.model, parsed.base, parsed.inferable) == (model, base, True)
    assert base_model_id(provider, raw) == base
    found = get_capability(raw, provider)
    if entry is None:
        assert found is None or found.evidence.startswith("inferred from family")
    else:
        assert found is not None
        assert found.model == entry


# A bare Ollama tag or OpenRouter variant is read as one only for its provider; every other
# form has a shape of its own.
SHAPED = [row for row in FORMS if not (row[0] in ("ollama", "openrouter") and ":" in str(row[1]))]


@pytest.mark.parametrize(("provider", "raw", "model", "base", "entry"), SHAPED)
def test_forms_with_a_shape_of_their_own_read_the_same_without_a_provider(
    provider: str | None, raw: str, model: str, base: str, entry: str | None
) -> None:
    parsed = parse_model_id(None, raw)
    assert (parsed.model, parsed.base) == (model, base)


def test_a_bedrock_id_keeps_its_geography_vendor_and_version() -> None:
    parsed = parse_model_id("bedrock", "us-gov.anthropic.claude-sonnet-4-5-20250929-v1:0")
    assert (parsed.geography, parsed.vendor, parsed.version, parsed.snapshot) == (
        "us-gov",
        "anthropic",
        "v1:0",
        "20250929",
    )
    arn = parse_model_id(
        None,
        "arn:aws:bedrock:eu-central-1:123456789012:inference-profile/eu.anthropic.claude-opus-4-7",
    )
    assert (arn.region, arn.resource, arn.geography, arn.model) == (
        "eu-central-1",
        "inference-profile",
        "eu",
        "claude-opus-4-7",
    )


@pytest.mark.parametrize(
    ("provider", "raw"),
    [
        # An Azure deployment name is the user's own (CLOUDS.md §3.1), even when it looks like
        # a model id: the deployment's model has to be configured.
        ("azure", "gpt-5.1"),
        ("azure", "my-reasoning-deployment"),
        # Bedrock ARNs that do not name their model (CLOUDS.md §1.8).
        (None, "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3d4e5f6"),
        (None, "arn:aws:bedrock:us-east-1:123456789012:provisioned-model/abcdef123456"),
        (None, "arn:aws:sagemaker:us-east-1:123456789012:endpoint/my-endpoint"),
        # A Vertex endpoint and a Gemini tuned model.
        ("vertex", "projects/p/locations/us-central1/endpoints/1234567890"),
        ("gemini", "tunedModels/my-tuned-model-abc"),
    ],
)
def test_ids_that_do_not_name_their_model_look_nothing_up(provider: str | None, raw: str) -> None:
    parsed = parse_model_id(provider, raw)
    assert parsed.inferable is False
    assert parsed.keys == () == lookup_keys(provider, raw)
    assert base_model_id(provider, raw) == raw
    assert get_capability(raw, provider) is None
    assert family_of(raw, provider) is None


def test_a_fine_tune_of_a_model_without_reasoning_is_not_sent_reasoning_effort() -> None:
    # The case: a fine-tune id was cut to "ft" and sent reasoning_effort, which OpenAI
    # answers with 400 for a model that does not reason.
    cap = get_capability("ft:gpt-4o-mini-2024-07-18:acme:support:9xYzAb", "openai")
    assert cap is not None
    assert cap.model == "gpt-4o-mini"
    assert cap.reasons is False


def test_a_dated_id_of_another_generation_does_not_find_the_latest_alias() -> None:
    # mistral-small-2506 is Small 3.2 (no reasoning_effort); mistral-small-latest is Small 4
    # (none|high): the dated id gets its own generation's family rule, not the alias's entry.
    small = get_capability("mistral-small-2506", "mistral")
    assert small is not None
    assert (small.model, small.supported_efforts) == ("mistral-small-2506", (Effort.NONE,))
    assert small.evidence.startswith("inferred from family Mistral before 2026")
    magistral = get_capability("magistral-medium-2509", "mistral")
    assert magistral is not None
    assert magistral.evidence.startswith("inferred from family Magistral")


def test_lookup_keys_go_from_the_dated_id_to_the_base_model() -> None:
    assert lookup_keys(None, "gemini-3.1-pro-preview-customtools") == (
        "gemini-3-1-pro-preview-customtools",
        "gemini-3-1-pro-preview",
        "gemini-3-1-pro",
    )
    assert lookup_keys("openrouter", "anthropic/claude-3.7-sonnet:thinking") == (
        "claude-3-7-sonnet:thinking",
        "claude-3-7-sonnet",
    )


def test_an_ollama_tag_keeps_its_size_and_never_falls_back_past_a_variant() -> None:
    # The size is tried first (an entry of its own wins); the bare name only when the tag has
    # no variant word that changes the rules ("instruct" models of Qwen3 do not think).
    assert lookup_keys("ollama", "qwen3:32b") == ("qwen3-32b", "qwen3")
    assert lookup_keys("ollama", "qwen3:235b-a22b-thinking-2507") == (
        "qwen3-235b-a22b-thinking-2507",
        "qwen3-235b-a22b-thinking",
        "qwen3-thinking",
    )
    assert "qwen3" not in lookup_keys("ollama", "qwen3:30b-a3b-instruct-2507-q4_K_M")


def test_model_key_and_identity() -> None:
    assert model_key(" GPT-5.5 ") == "gpt-5-5"
    # A full date names the same model; a short date may name another generation.
    assert normalise_model_name("claude-sonnet-4-5@20250929") == "claude-sonnet-4-5"
    assert normalise_model_name("grok-4-0709") == "grok-4-0709"
    assert normalise_model_name("kimi-k3.1-pro-highspeed") == "kimi-k3-1-pro-highspeed"


def test_a_bedrock_id_is_priced_as_the_model_it_names() -> None:
    usage = Usage(input_tokens=1000, output_tokens=200)
    bedrock = price(usage, "anthropic", "us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    native = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=1000, output_tokens=200),
        model_ref="claude-sonnet-4-5-20250929",
        provider_id="anthropic",
    )
    assert bedrock is not None
    assert bedrock.total == float(native.total_price) == 0.006


def test_the_docs_id_example_reads_each_form_back(capsys: pytest.CaptureFixture[str]) -> None:
    from tests import doc_blocks

    block = doc_blocks.block_with("base_model_id")
    exec(compile(block, "registry.md", "exec"), {})
    assert capsys.readouterr().out.splitlines() == [
        "claude-haiku-4-5",
        "claude-haiku-4-5",
        "qwen3-32b",
        "False",
    ]
