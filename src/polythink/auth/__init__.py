"""Credential providers for the clouds: each signs or authorises a request at the HTTP edge.

A source of a cloud provider (``bedrock``, ``vertex``, ``azure``) that has an API key sends
it as a header like every other provider (a Bedrock API key as a bearer token, a Vertex
express-mode key as ``x-goog-api-key``, an Azure key as ``api-key``). Without one, its
transport gets an :class:`httpx.Auth` from :func:`cloud_auth`, which httpx runs on each
request after it is built, so what is signed is exactly what is sent:

- ``aws``: :class:`polythink.auth.aws.SigV4Auth`, SigV4 with botocore's signer and its
  standard credential chain (environment, shared config and SSO, web identity, container
  and instance roles), or the ``Source.credentials`` given;
- ``google``: :class:`polythink.auth.google.GoogleAuth`, OAuth access tokens from
  google-auth's Application Default Credentials (or the credentials given), refreshed before
  they expire;
- ``azure``: :class:`polythink.auth.azure.EntraAuth`, Microsoft Entra ID tokens from
  azure-identity's ``DefaultAzureCredential`` (or the credential given).

Each cloud's library is imported only by its own module, when a source of that cloud is
built, through the optional extras ``polythink[bedrock]``, ``polythink[vertex]`` and
``polythink[azure]``. Whatever may block (a credential chain reading files or a metadata
service, a token refresh over HTTP) runs in a worker thread, never on the event loop. A
credential that cannot be found or refreshed raises :class:`~polythink.errors.AuthError`
naming what to set; no token, key or signature is ever part of a message, log line or span.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polythink.errors import InvalidInputError

if TYPE_CHECKING:
    import httpx

    from polythink.config import Source
    from polythink.providers import ProviderProfile

__all__ = ["LIBRARIES", "check_cloud", "cloud_auth", "missing_library"]

LIBRARIES: dict[str, tuple[str, str]] = {
    "aws": ("bedrock", "botocore"),
    "google": ("vertex", "google.auth"),
    "azure": ("azure", "azure.identity"),
}
"""Cloud -> (the extra that installs its library, the module the signer imports)."""


def missing_library(extra: str, module: str, provider: str) -> ValueError:
    """The error for a cloud library that is not installed, naming the extra that brings it."""
    if extra == "bedrock":
        return InvalidInputError(
            f"provider {provider!r} signs its calls and reads its streams with {module}, which "
            "is not installed: pip install 'polythink[bedrock]'"
        )
    return InvalidInputError(
        f"provider {provider!r} signs its calls with {module}, which is not installed: "
        f"pip install 'polythink[{extra}]' (or give an API key)"
    )


def check_cloud(source: Source, profile: ProviderProfile, api_key: str | None, index: int) -> None:
    """Refuse, when the client is built, a cloud source that cannot work: a missing region,
    project or resource endpoint (:attr:`polythink.config.Source.endpoint` names where to set
    it), or a cloud library it needs that is not installed (naming the extra): botocore for
    every Bedrock source (its streams are AWS event streams), google-auth and azure-identity
    for sources without a key or a token function. The library is looked for, not imported.

    Raises:
        ValueError: naming ``sources[index]`` and what to set or install.
    """
    import importlib.util

    where = f"sources[{index}] ({source.provider}/{source.model})"
    try:
        _ = source.endpoint
        if profile.cloud == "aws" and api_key is None:
            _ = source.aws_region
    except ValueError as exc:
        raise InvalidInputError(f"{where}: {exc}") from None
    cloud = profile.cloud
    # Bedrock's streams are AWS event streams, read with botocore whatever signs the calls.
    if cloud is None or (api_key is not None and cloud != "aws"):
        return
    given = source.credentials
    if cloud != "aws" and callable(given) and not hasattr(given, "get_token"):
        return
    extra, module = LIBRARIES[cloud]
    if importlib.util.find_spec(module.split(".")[0]) is None or (
        importlib.util.find_spec(module) is None
    ):
        raise InvalidInputError(f"{where}: {missing_library(extra, module, profile.id)}")


def cloud_auth(
    source: Source, profile: ProviderProfile, api_key: str | None, index: int
) -> httpx.Auth | None:
    """The request signer of a cloud source that has no API key, else ``None``.

    Raises:
        ValueError: the cloud's library is not installed (naming the extra), or a setting
            the signer needs (the AWS region) is missing.
    """
    cloud = profile.cloud
    if cloud is None or api_key is not None:
        return None
    given: Any = source.credentials
    if cloud == "aws":
        from polythink.auth.aws import SigV4Auth

        return SigV4Auth(
            region=source.aws_region, credentials=given, provider=profile.id, source_index=index
        )
    if cloud == "google":
        from polythink.auth.google import GoogleAuth

        return GoogleAuth(credentials=given, provider=profile.id, source_index=index)
    from polythink.auth.azure import EntraAuth, scope_for

    return EntraAuth(
        scope=scope_for(profile), credentials=given, provider=profile.id, source_index=index
    )
