"""The clouds as configuration: provider ids and aliases, endpoints from region, project and
resource, which profile serves a model, what is refused when the client is built, and the
pure pieces (vendor of an id, Converse reasoning dialects, Azure URLs, price names)."""

from __future__ import annotations

import re

import pytest

from polythink import Client, Source
from polythink.clouds import azure_api_root, azure_url, model_vendor
from polythink.config import sources_from_env
from polythink.middleware.cost import price_names
from polythink.providers import get_provider, suggest_provider
from polythink.reasoning.converse import converse_dialect
from polythink.reasoning.resolve import resolve
from polythink.transports.bedrock import invoke_body, model_path
from polythink.transports.vertex import model_resource
from tests.cloud_support import clear_cloud_environment


@pytest.fixture(autouse=True)
def no_cloud_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_cloud_environment(monkeypatch)


@pytest.mark.parametrize(
    ("alias", "provider"),
    [
        ("aws-bedrock", "bedrock"),
        ("amazon-bedrock", "bedrock"),
        ("vertex-ai", "vertex"),
        ("google-vertex", "vertex"),
        ("vertexai", "vertex"),
        ("azure-openai", "azure"),
        ("azure-foundry", "azure"),
        ("microsoft-foundry", "azure"),
    ],
)
def test_the_names_users_try_are_the_cloud_providers(alias: str, provider: str) -> None:
    source = Source(alias, "m", region="us-east-1") if provider != "azure" else Source(alias, "m")
    assert source.provider == provider
    assert get_provider(alias).id == provider


@pytest.mark.parametrize(
    ("typed", "suggested"),
    [
        ("bedrok", "bedrock"),
        ("Vertex_AI", "vertex"),
        ("azure-openia", "azure"),
        ("aws_bedrock", "bedrock"),
        ("google-vertex-gemini", "vertex"),
    ],
)
def test_a_near_miss_suggests_the_cloud_provider(typed: str, suggested: str) -> None:
    assert suggest_provider(typed) == f" (did you mean {suggested!r}?)"
    with pytest.raises(ValueError, match=f"did you mean {suggested!r}"):
        Source(typed, "m")


def test_bedrock_endpoint_comes_from_the_region_given_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert (
        Source("bedrock", "m", region="eu-central-1").endpoint
        == "https://bedrock-runtime.eu-central-1.amazonaws.com"
    )
    assert (
        Source("bedrock", "m", region="cn-north-1").endpoint
        == "https://bedrock-runtime.cn-north-1.amazonaws.com.cn"
    )
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    assert Source("bedrock", "m").endpoint == "https://bedrock-runtime.us-west-2.amazonaws.com"
    monkeypatch.setenv("AWS_REGION", "ap-northeast-1")
    assert Source("bedrock", "m").aws_region == "ap-northeast-1"


def test_a_bedrock_source_without_a_region_is_refused_when_the_client_is_built() -> None:
    expected = (
        "sources[0] (bedrock/us.anthropic.claude-opus-4-8): the bedrock source "
        "'us.anthropic.claude-opus-4-8' needs an AWS region: set Source(region='us-east-1') or "
        "AWS_REGION"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        Client([Source("bedrock", "us.anthropic.claude-opus-4-8")])


def test_a_region_that_is_not_one_is_refused() -> None:
    with pytest.raises(ValueError, match="is not an AWS region name"):
        _ = Source("bedrock", "m", region="us-east-1.evil.example").endpoint


@pytest.mark.parametrize(
    ("location", "endpoint"),
    [
        ("global", "https://aiplatform.googleapis.com/v1/projects/p1/locations/global"),
        ("us", "https://aiplatform.us.rep.googleapis.com/v1/projects/p1/locations/us"),
        ("eu", "https://aiplatform.eu.rep.googleapis.com/v1/projects/p1/locations/eu"),
        (
            "us-east5",
            "https://us-east5-aiplatform.googleapis.com/v1/projects/p1/locations/us-east5",
        ),
    ],
)
def test_vertex_hosts_by_location(location: str, endpoint: str) -> None:
    assert Source("vertex", "gemini-3-pro", project="p1", region=location).endpoint == endpoint


def test_vertex_project_and_location_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "env-project")
    monkeypatch.setenv("CLOUD_ML_REGION", "europe-west4")
    assert Source("vertex", "claude-opus-4-8").endpoint == (
        "https://europe-west4-aiplatform.googleapis.com/v1/projects/env-project/locations/"
        "europe-west4"
    )


def test_vertex_express_mode_is_an_api_key_without_a_project(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "AIzaSyExampleExpressKey00000000000")
    source = Source("vertex", "gemini-3-pro")
    assert source.endpoint == "https://aiplatform.googleapis.com/v1"
    # A project means OAuth: the environment's key is not read then, nor for Claude.
    assert Source("vertex", "gemini-3-pro", project="p1").resolve_api_key() is None
    assert Source("vertex", "claude-opus-4-8", project="p1").resolve_api_key() is None


def test_a_vertex_source_without_project_or_key_says_where_to_set_it() -> None:
    expected = (
        "sources[0] (vertex/gemini-3-pro): the vertex source 'gemini-3-pro' needs a Google "
        "Cloud project: set Source(project=...) or GOOGLE_CLOUD_PROJECT (or give an "
        "express-mode API key as api_key=)"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        Client([Source("vertex", "gemini-3-pro")])


@pytest.mark.parametrize(
    ("base_url", "api_version", "root"),
    [
        ("https://res.openai.azure.com", None, "https://res.openai.azure.com/openai/v1"),
        ("https://res.openai.azure.com/", "v1", "https://res.openai.azure.com/openai/v1"),
        (
            "https://res.services.ai.azure.com/openai/v1",
            None,
            "https://res.services.ai.azure.com/openai/v1",
        ),
        (
            "https://res.openai.azure.com",
            "2025-04-01-preview",
            "https://res.openai.azure.com/openai",
        ),
        (
            "https://res.openai.azure.com/openai/v1",
            "2024-10-21",
            "https://res.openai.azure.com/openai",
        ),
        ("https://gateway.example/azure", None, "https://gateway.example/azure"),
    ],
)
def test_azure_roots(base_url: str, api_version: str | None, root: str) -> None:
    assert azure_api_root(base_url, api_version) == root


def test_azure_urls_of_the_v1_and_deployments_apis() -> None:
    v1 = "https://res.openai.azure.com/openai/v1"
    assert azure_url(v1, "/chat/completions", "prod chat", None) == f"{v1}/chat/completions"
    dated = "https://res.openai.azure.com/openai"
    assert azure_url(dated, "/chat/completions", "prod chat", "2025-04-01-preview") == (
        f"{dated}/deployments/prod%20chat/chat/completions?api-version=2025-04-01-preview"
    )
    assert azure_url(dated, "/responses", "prod", "2025-04-01-preview") == (
        f"{dated}/responses?api-version=2025-04-01-preview"
    )


def test_azure_api_version_takes_v1_or_a_date() -> None:
    Source("azure", "d", base_url="https://r.openai.azure.com", api_version="2024-10-21")
    expected = (
        "Source.api_version must be one of v1 or a dated api-version such as "
        "'2025-04-01-preview' (or None); got 'latest'"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        Source("azure", "d", base_url="https://r.openai.azure.com", api_version="latest")


def test_an_azure_source_without_an_endpoint_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="needs its resource endpoint"):
        Client([Source("azure", "prod-chat", api_key="k" * 32)])
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://res.openai.azure.com")
    assert Source("azure", "prod-chat").endpoint == "https://res.openai.azure.com/openai/v1"


@pytest.mark.parametrize(
    ("model", "vendor"),
    [
        ("anthropic.claude-opus-4-8", "anthropic"),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic"),
        ("global.anthropic.claude-opus-4-8", "anthropic"),
        ("us-gov.anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic"),
        ("openai.gpt-oss-120b-1:0", "openai"),
        ("global.amazon.nova-2-lite-v1:0", "amazon"),
        (
            "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-opus-4-8",
            "anthropic",
        ),
        ("arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3", None),
        ("anthropic/claude-opus-4-8", "anthropic"),
        ("publishers/anthropic/models/claude-opus-4-8", "anthropic"),
        ("claude-sonnet-4-5@20250929", None),
        ("gpt-5.5", None),
        ("gemini-2.5-pro", None),
        ("prod-chat", None),
    ],
)
def test_the_vendor_a_cloud_id_names(model: str, vendor: str | None) -> None:
    assert model_vendor(model) == vendor


@pytest.mark.parametrize(
    ("provider", "model", "served_by"),
    [
        ("bedrock", "us.anthropic.claude-opus-4-8", "bedrock"),
        ("bedrock", "openai.gpt-oss-120b-1:0", "bedrock-converse"),
        ("bedrock", "global.amazon.nova-2-lite-v1:0", "bedrock-converse"),
        ("bedrock-converse", "us.anthropic.claude-opus-4-8", "bedrock-converse"),
        ("vertex", "claude-opus-4-8", "vertex-anthropic"),
        ("vertex", "gemini-3-pro", "vertex"),
        ("azure", "prod-chat", "azure"),
    ],
)
def test_the_profile_that_serves_a_cloud_model(provider: str, model: str, served_by: str) -> None:
    settings = {
        "bedrock": {"region": "us-east-1"},
        "bedrock-converse": {"region": "us-east-1"},
        "vertex": {"project": "p1"},
        "azure": {"base_url": "https://r.openai.azure.com"},
    }
    assert Source(provider, model, **settings[provider]).profile.id == served_by


def test_an_application_inference_profile_is_routed_by_its_base_model() -> None:
    arn = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3"
    assert Source("bedrock", arn, region="us-east-1", base_model="gpt-oss-120b").profile.id == (
        "bedrock-converse"
    )
    assert Source("bedrock", arn, region="us-east-1", base_model="claude-opus-4-8").profile.id == (
        "bedrock"
    )


@pytest.mark.parametrize(
    ("model", "provider", "dialect"),
    [
        ("us.anthropic.claude-opus-4-8", None, "anthropic"),
        ("openai.gpt-oss-120b-1:0", "openai", "reasoning_effort"),
        ("gpt-oss-20b", "openai", "reasoning_effort"),
        ("global.openai.gpt-5.6-luna", "openai", "reasoning"),
        ("gpt-5.5", "openai", "reasoning"),
        ("us.amazon.nova-2-lite-v1:0", None, "reasoningConfig"),
        ("deepseek.v3-v1:0", None, "reasoning_effort"),
        ("moonshotai.kimi-k3", "kimi", "reasoning_effort"),
        ("claude-opus-4-8", "anthropic", "anthropic"),
    ],
)
def test_converse_reasoning_dialect_per_vendor(
    model: str, provider: str | None, dialect: str
) -> None:
    assert converse_dialect(model, provider) == dialect


def test_invoke_model_body_and_path() -> None:
    body = {"model": "m", "max_tokens": 10, "messages": [], "stream": True}
    assert invoke_body(body, version="bedrock-2023-05-31", betas=["b1", "b2"]) == {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 10,
        "messages": [],
        "anthropic_beta": ["b1", "b2"],
    }
    assert invoke_body({**body, "anthropic_beta": ["b2"]}, version="v", betas=["b1", "b2"])[
        "anthropic_beta"
    ] == ["b2", "b1"]
    assert model_path("anthropic.claude-haiku-4-5-20251001-v1:0") == (
        "anthropic.claude-haiku-4-5-20251001-v1:0"
    )
    assert model_path("arn:aws:bedrock:us-east-1:1:inference-profile/us.x") == (
        "arn:aws:bedrock:us-east-1:1:inference-profile%2Fus.x"
    )


def test_vertex_model_resources() -> None:
    assert model_resource("claude-sonnet-4-5@20250929", "anthropic") == (
        "publishers/anthropic/models/claude-sonnet-4-5@20250929"
    )
    assert model_resource("anthropic/claude-opus-4-8", "google") == (
        "publishers/anthropic/models/claude-opus-4-8"
    )
    assert model_resource("gemini-3-pro", "google") == "publishers/google/models/gemini-3-pro"


def test_price_names_put_the_bedrock_id_first() -> None:
    bedrock = Source("bedrock", "global.anthropic.claude-opus-4-8", region="us-east-1")
    assert price_names(bedrock, "claude-opus-4-8", by_id=True) == [
        "global.anthropic.claude-opus-4-8",
        "claude-opus-4-8",
    ]
    azure = Source(
        "azure", "prod-chat", base_url="https://r.openai.azure.com", base_model="gpt-5.5"
    )
    assert price_names(azure, "gpt-5.5-2026-08-07") == [
        "gpt-5.5-2026-08-07",
        "gpt-5.5",
        "prod-chat",
    ]


def test_cloud_fields_where_they_mean_nothing_are_refused() -> None:
    with pytest.raises(ValueError, match=r"Source\.region is for the bedrock and vertex providers"):
        Source("openai", "gpt-5.5", region="us-east-1")
    with pytest.raises(ValueError, match=r"Source\.project is the Google Cloud project"):
        Source("bedrock", "m", project="p")
    with pytest.raises(ValueError, match=r"Source\.credentials is for the cloud providers"):
        Source("openai", "gpt-5.5", credentials=lambda: "t")


def test_cloud_sources_from_the_environment() -> None:
    (bedrock, azure) = sources_from_env(
        "CHAT",
        {
            "CHAT__AWS_BEDROCK__0__MODEL": "us.anthropic.claude-opus-4-8",
            "CHAT__AWS_BEDROCK__0__REGION": "us-west-2",
            "CHAT__AZURE__1__MODEL": "prod-chat",
            "CHAT__AZURE__1__BASE_MODEL": "gpt-5.5",
            "CHAT__AZURE__1__BASE_URL": "https://r.openai.azure.com",
        },
    )
    assert (bedrock.provider, bedrock.region) == ("bedrock", "us-west-2")
    assert (azure.provider, azure.base_model, azure.registry_model) == (
        "azure",
        "gpt-5.5",
        "gpt-5.5",
    )


@pytest.mark.parametrize(
    ("model", "payload"),
    [
        (
            "us.amazon.nova-2-lite-v1:0",
            {
                "additionalModelRequestFields": {
                    "reasoningConfig": {"type": "enabled", "maxReasoningEffort": "high"}
                }
            },
        ),
        (
            "global.openai.gpt-6-luna",
            {"additionalModelRequestFields": {"reasoning": {"effort": "high"}}},
        ),
        ("deepseek.v3-v1:0", {"additionalModelRequestFields": {"reasoning_effort": "high"}}),
        (
            "us.anthropic.claude-opus-4-8",
            {
                "additionalModelRequestFields": {
                    "thinking": {"type": "adaptive", "display": "summarized"},
                    "output_config": {"effort": "high"},
                }
            },
        ),
        (
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            {
                "additionalModelRequestFields": {
                    "thinking": {"type": "enabled", "budget_tokens": 16384}
                },
                "inferenceConfig": {"maxTokens": 16384 + 1000},
            },
        ),
    ],
)
def test_converse_reasoning_fields_per_vendor(model: str, payload: dict[str, object]) -> None:
    resolution = resolve("high", provider="bedrock-converse", model=model, max_tokens=1000)
    assert resolution.payload == payload


def test_nova_switched_off_on_converse() -> None:
    resolution = resolve("none", provider="bedrock-converse", model="amazon.nova-2-lite-v1:0")
    assert resolution.payload == {
        "additionalModelRequestFields": {"reasoningConfig": {"type": "disabled"}}
    }


@pytest.mark.parametrize(
    ("source", "module", "message"),
    [
        (
            Source("bedrock", "us.anthropic.claude-opus-4-8", region="us-east-1", api_key="k" * 20),
            "botocore",
            "provider 'bedrock' signs its calls and reads its streams with botocore, which is not "
            "installed: pip install 'polythink[bedrock]'",
        ),
        (
            Source("vertex", "gemini-3-pro", project="p1"),
            "google",
            "provider 'vertex' signs its calls with google.auth, which is not installed: pip "
            "install 'polythink[vertex]' (or give an API key)",
        ),
        (
            Source("azure", "prod-chat", base_url="https://r.openai.azure.com"),
            "azure",
            "provider 'azure' signs its calls with azure.identity, which is not installed: pip "
            "install 'polythink[azure]' (or give an API key)",
        ),
    ],
)
def test_a_missing_cloud_library_names_its_extra_when_the_client_is_built(
    monkeypatch: pytest.MonkeyPatch, source: Source, module: str, message: str
) -> None:
    import importlib.util

    found = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == module else found(name)
    )
    expected = f"sources[0] ({source.provider}/{source.model}): {message}"
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        Client([source])


def test_a_token_function_needs_no_cloud_library(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    found = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "google" else found(name)
    )
    Client([Source("vertex", "gemini-3-pro", project="p1", credentials=lambda: "token")])
