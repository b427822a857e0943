"""Microsoft Entra ID tokens for Azure OpenAI and Foundry, from azure-identity
(``pip install 'polythink[azure]'``).

Without ``Source.credentials``, ``azure.identity.DefaultAzureCredential`` finds the credential
(environment service principal, workload identity, managed identity, Azure CLI, …), as the
Azure docs' examples do with ``get_bearer_token_provider`` (CLOUDS.md §3.1). Its synchronous
``get_token`` runs in a worker thread; the token is kept until five minutes before its
``expires_on`` (tokens last about 60 to 90 minutes). The scope is
``https://cognitiveservices.azure.com/.default`` for the OpenAI routes (the Azure OpenAI REST
docs' ``az account get-access-token --resource https://cognitiveservices.azure.com``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import anyio

from polythink.auth import missing_library
from polythink.auth._base import TokenAuth, auth_error
from polythink.providers import ProviderProfile

__all__ = ["COGNITIVE_SERVICES_SCOPE", "EntraAuth", "scope_for"]

COGNITIVE_SERVICES_SCOPE = "https://cognitiveservices.azure.com/.default"
"""The Entra ID scope of Azure OpenAI's data plane (CLOUDS.md §3.1, AZ-REASON)."""

REFRESH_BEFORE = 300.0
"""Seconds before a token's expiry at which it is replaced."""

_FIX = (
    "run 'az login', set AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET, use a "
    "managed identity with the 'Cognitive Services OpenAI User' role, give "
    "Source(credentials=...), or an api-key in AZURE_OPENAI_API_KEY"
)


def scope_for(profile: ProviderProfile) -> str:
    """The Entra ID scope of ``profile``'s routes."""
    return COGNITIVE_SERVICES_SCOPE


class EntraAuth(TokenAuth):
    """Bearer tokens from an azure-identity credential, fetched off the event loop.

    Args:
        scope: the Entra ID scope to ask a token for.
        credentials: a ``TokenCredential`` (``get_token``, sync or async), a callable returning
            a token (``get_bearer_token_provider``'s result, plain or async; asked on every
            request), or ``None`` for ``DefaultAzureCredential``.
        provider, source_index: for messages.
        clock: wall-clock seconds, injectable for tests.

    Raises:
        ValueError: azure-identity is not installed and a credential must be found.
    """

    def __init__(
        self,
        *,
        scope: str = COGNITIVE_SERVICES_SCOPE,
        credentials: Any = None,
        provider: str = "azure",
        source_index: int | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        has_get_token = hasattr(credentials, "get_token")
        super().__init__(
            provider=provider,
            source_index=source_index,
            token_provider=credentials if callable(credentials) and not has_get_token else None,
            refresh_before=REFRESH_BEFORE,
            **({"clock": clock} if clock is not None else {}),
        )
        self.scope = scope
        self._credential: Any = credentials if has_get_token else None
        if self._credential is None and self._provider is None:
            try:
                import azure.identity  # noqa: F401
            except ImportError:
                raise missing_library("azure", "azure-identity", provider) from None

    async def fetch(self) -> tuple[str, float | None]:
        """Ask the credential for a token of :attr:`scope`.

        Raises:
            AuthError: no credential could be found, or it refused.
        """
        if self._credential is None:
            from azure.identity import DefaultAzureCredential

            self._credential = DefaultAzureCredential()
        credential = self._credential
        try:
            if inspect.iscoroutinefunction(credential.get_token):
                access = await credential.get_token(self.scope)
            else:
                access = await anyio.to_thread.run_sync(credential.get_token, self.scope)
        except Exception as exc:
            raise auth_error(
                self.provider,
                self.source_index,
                f"no Microsoft Entra ID token for {self.scope}",
                _FIX,
                exc,
            ) from None
        return str(access.token), float(access.expires_on)
