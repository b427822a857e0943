"""Where the clouds' endpoints are, and what a cloud model id says of its vendor.

Pure functions over a source's settings and the environment; no cloud library is imported
here (the credential providers that need one are in :mod:`polythink.auth`). Which profile
serves a model (:func:`serving_profile`, :func:`vendor_of`, :func:`model_vendor`) is decided
in :mod:`polythink.reasoning.serving`, where resolution reads it too.

Facts (CLOUDS.md, read 2026-12-04):

- Bedrock runtime: ``https://bedrock-runtime.{region}.amazonaws.com`` (``.amazonaws.com.cn``
  in the China partition), from botocore 1.44.8's endpoint rule set (§1.1). The region comes
  from ``Source.region``, else ``AWS_REGION``, else ``AWS_DEFAULT_REGION`` (botocore's order);
  like the Anthropic SDK's clients since 1.0, there is no default region.
- Vertex AI: ``https://aiplatform.googleapis.com`` for ``global``,
  ``https://aiplatform.{us|eu}.rep.googleapis.com`` for the multi-regions, else
  ``https://{location}-aiplatform.googleapis.com``; resources under
  ``/v1/projects/{project}/locations/{location}`` (google-genai 3.6.1, §2.1). Express mode
  (an API key) drops the project and location: ``/v1/publishers/google/models/…``.
- Azure OpenAI: the v1 API under ``{resource}/openai/v1``; the deployments API under
  ``{resource}/openai`` with a dated ``api-version`` (§3.1).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from urllib.parse import quote

from polythink.errors import InvalidInputError
from polythink.reasoning.serving import model_vendor, serving_profile, vendor_of

__all__ = [
    "AWS_REGION_ENV",
    "AZURE_ENDPOINT_ENV",
    "GEO_PREFIXES",
    "VERTEX_LOCATION_ENV",
    "VERTEX_PROJECT_ENV",
    "azure_api_root",
    "azure_url",
    "bedrock_endpoint",
    "dated_api_version",
    "first_env",
    "model_vendor",
    "serving_profile",
    "vendor_of",
    "vertex_endpoint",
    "vertex_express_endpoint",
]

AWS_REGION_ENV = ("AWS_REGION", "AWS_DEFAULT_REGION")
"""Variables holding the AWS region, in botocore's order."""
VERTEX_PROJECT_ENV = ("GOOGLE_CLOUD_PROJECT", "ANTHROPIC_VERTEX_PROJECT_ID")
"""Variables holding the Google Cloud project (google-genai's, then the Anthropic SDK's)."""
VERTEX_LOCATION_ENV = ("GOOGLE_CLOUD_LOCATION", "CLOUD_ML_REGION")
"""Variables holding the Vertex location (google-genai's, then the Anthropic SDK's);
``global`` when none is set, as google-genai defaults."""
AZURE_ENDPOINT_ENV = ("AZURE_OPENAI_ENDPOINT",)
"""Variable holding the Azure resource endpoint (``https://{resource}.openai.azure.com``), as
the openai SDK's ``AzureOpenAI`` reads it."""

GEO_PREFIXES = ("global", "us", "eu", "apac", "jp", "au", "us-gov", "ca", "in")
"""The geography prefixes of Bedrock's system-defined inference profiles (``us.``, ``eu.``,
``global.`` …): the AWS CDK's ``CrossRegionInferenceProfileRegion`` enum (CLOUDS.md §1.8);
``ca`` and ``in`` appear in client configurations and price tables."""

_REGION = re.compile(r"[a-z]{2}(?:-[a-z]+)+-[0-9]{1,2}")
_LOCATION = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_PROJECT = re.compile(r"[A-Za-z0-9][A-Za-z0-9.:\-]{0,99}")
_DATED = re.compile(r"20[0-9]{2}-[01][0-9]-[0-3][0-9](?:-preview)?")


def first_env(names: tuple[str, ...], environ: Mapping[str, str] | None = None) -> str | None:
    """The first of ``names`` set to a non-blank value in ``environ`` (the process's), stripped."""
    env = os.environ if environ is None else environ
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return value
    return None


def bedrock_endpoint(region: str) -> str:
    """The Bedrock runtime root for ``region`` (no trailing slash).

    Raises:
        ValueError: ``region`` is not an AWS region name (``us-east-1``, ``eu-central-2``,
            ``us-gov-west-1`` …).
    """
    if not _REGION.fullmatch(region):
        raise InvalidInputError(
            f"Bedrock region {region!r} is not an AWS region name such as 'us-east-1' or "
            "'eu-central-1'"
        )
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"https://bedrock-runtime.{region}.{suffix}"


def vertex_endpoint(project: str, location: str, root: str | None = None) -> str:
    """The Vertex resource root ``{root}/projects/{project}/locations/{location}``, where
    ``root`` is ``https://{host}/v1`` for the location's host unless given (a ``base_url``).

    Raises:
        ValueError: ``project`` or ``location`` is not a name Google Cloud uses.
    """
    if not _PROJECT.fullmatch(project):
        raise InvalidInputError(
            f"Vertex project {project!r} is not a Google Cloud project id (letters, digits, "
            "'-', '.', ':')"
        )
    if not _LOCATION.fullmatch(location):
        raise InvalidInputError(
            f"Vertex location {location!r} is not a location such as 'global', 'us', 'eu' or "
            "'us-central1'"
        )
    if root is None:
        if location == "global":
            host = "aiplatform.googleapis.com"
        elif location in ("us", "eu"):
            host = f"aiplatform.{location}.rep.googleapis.com"
        else:
            host = f"{location}-aiplatform.googleapis.com"
        root = f"https://{host}/v1"
    return f"{root}/projects/{project}/locations/{location}"


def vertex_express_endpoint() -> str:
    """The root of Vertex express mode (an API key, no project or location; CLOUDS.md §2.1)."""
    return "https://aiplatform.googleapis.com/v1"


def dated_api_version(version: str) -> bool:
    """Whether ``version`` is a dated Azure OpenAI ``api-version`` (``2025-04-01-preview``)."""
    return _DATED.fullmatch(version) is not None


def azure_api_root(base_url: str, api_version: str | None) -> str:
    """The root the Azure OpenAI paths are appended to.

    ``base_url`` is the resource endpoint (``https://{resource}.openai.azure.com``, a
    Foundry ``…services.ai.azure.com`` or ``…cognitiveservices.azure.com`` one), or already a
    root under it (``…/openai/v1``, ``…/openai``). The v1 API (``api_version`` ``None`` or
    ``v1``) lives under ``/openai/v1``; the deployments API (a dated version) under
    ``/openai``. A ``base_url`` with another path is used as it is (a gateway in front).
    """
    root = base_url.rstrip("/")
    path = re.sub(r"^https?://[^/]+", "", root)
    dated = api_version is not None and dated_api_version(api_version)
    if path in ("", "/"):
        return f"{root}/openai" if dated else f"{root}/openai/v1"
    if dated and path.endswith("/openai/v1"):
        return root[: -len("/v1")]
    if not dated and path.endswith("/openai"):
        return f"{root}/v1"
    return root


def azure_url(root: str, path: str, deployment: str, api_version: str | None) -> str:
    """The URL of an Azure OpenAI ``path`` (``/chat/completions``, ``/responses``) under
    ``root`` (:func:`azure_api_root`).

    The v1 API: ``{root}{path}``, the deployment named by the body's ``model``. The
    deployments API (a dated ``api_version``): Chat Completions under
    ``{root}/deployments/{deployment}``, Responses at ``{root}/responses`` with the deployment
    in the body (the openai SDK's ``AzureOpenAI`` inserts the deployment only for Chat
    Completions and a few other paths; CLOUDS.md §3.1), each with ``?api-version=…``.
    """
    if api_version is None or not dated_api_version(api_version):
        return f"{root}{path}"
    if path == "/chat/completions":
        root = f"{root}/deployments/{quote(deployment, safe='')}"
    return f"{root}{path}?api-version={api_version}"
