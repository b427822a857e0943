"""OAuth access tokens for Vertex AI, from google-auth (``pip install 'polythink[vertex]'``).

Without ``Source.credentials``, the token comes from Application Default Credentials:
``google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])``, which covers
``GOOGLE_APPLICATION_CREDENTIALS``, ``gcloud auth application-default login``, workload
identity and the metadata server (CLOUDS.md §2.4, from the Anthropic SDK 2.17.0's Vertex client
and google-genai 3.6.1). A token is refreshed when google-auth reports it stale (within
``REFRESH_THRESHOLD``, 3 min 45 s, of its expiry) or invalid, with
``google.auth.transport.requests.Request``, in a worker thread: google-auth ships no httpx
transport and its refresh is blocking HTTP. A quota project on the credentials is sent as
``x-goog-user-project``, as google-genai does.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import anyio

from polythink.auth import missing_library
from polythink.auth._base import TokenAuth, auth_error

__all__ = ["SCOPES", "GoogleAuth"]

SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
"""The OAuth scope Vertex AI calls need (CLOUDS.md §2.4)."""

_FIX = (
    "run 'gcloud auth application-default login', set GOOGLE_APPLICATION_CREDENTIALS to a "
    "service-account key file, or give Source(credentials=...)"
)


class GoogleAuth(TokenAuth):
    """Bearer tokens from google-auth credentials, refreshed off the event loop.

    Args:
        credentials: a ``google.auth.credentials.Credentials``, a callable returning a token
            (plain or async; asked on every request), or ``None`` for Application Default
            Credentials.
        provider, source_index: for messages.

    Raises:
        ValueError: google-auth is not installed and a credentials object must be found.
    """

    def __init__(
        self,
        *,
        credentials: Any = None,
        provider: str = "vertex",
        source_index: int | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        callable_given = callable(credentials) and not hasattr(credentials, "refresh")
        super().__init__(
            provider=provider,
            source_index=source_index,
            token_provider=credentials if callable_given else None,
            # google-auth decides staleness itself (token_state); a token is kept until it
            # says so.
            refresh_before=0.0,
            **({"clock": clock} if clock is not None else {}),
        )
        self._credentials: Any = None if callable_given else credentials
        if not callable_given:
            try:
                import google.auth  # noqa: F401
            except ImportError:
                raise missing_library("vertex", "google-auth", provider) from None

    def _fresh(self) -> bool:
        from google.auth.credentials import TokenState

        credentials = self._credentials
        return (
            credentials is not None
            and self._token is not None
            and self._token == credentials.token
            and credentials.token_state is TokenState.FRESH
        )

    async def fetch(self) -> tuple[str, float | None]:
        """Find the credentials (first time), refresh them unless their token is fresh, return
        their token.

        Raises:
            AuthError: no Application Default Credentials, or a refresh that failed.
        """
        from google.auth.credentials import TokenState

        if self._credentials is None:
            self._credentials = await anyio.to_thread.run_sync(self._default)
        credentials = self._credentials
        if credentials.token_state is not TokenState.FRESH:
            await anyio.to_thread.run_sync(self._refresh, credentials)
        token = credentials.token
        if not isinstance(token, str) or not token:
            raise auth_error(
                self.provider,
                self.source_index,
                "the Google credentials gave no access token after a refresh",
                _FIX,
            )
        expiry = credentials.expiry
        expires = (
            expiry.replace(tzinfo=datetime.UTC).timestamp()
            if isinstance(expiry, datetime.datetime)
            else None
        )
        return token, expires

    def _default(self) -> Any:
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError

        try:
            credentials, _ = google.auth.default(scopes=list(SCOPES))
        except DefaultCredentialsError as exc:
            raise auth_error(
                self.provider,
                self.source_index,
                "no Google Application Default Credentials were found",
                _FIX,
                exc,
            ) from None
        return credentials

    def _refresh(self, credentials: Any) -> None:
        from google.auth.exceptions import GoogleAuthError

        try:
            from google.auth.transport.requests import Request
        except ImportError:
            raise missing_library(
                "vertex", "google-auth's requests transport", self.provider
            ) from None
        try:
            credentials.refresh(Request())
        except GoogleAuthError as exc:
            raise auth_error(
                self.provider,
                self.source_index,
                "the Google credentials could not be refreshed",
                _FIX,
                exc,
                (getattr(credentials, "token", None),),
            ) from None

    def extra_headers(self) -> dict[str, str]:
        """``x-goog-user-project`` when the credentials name a quota project."""
        quota = getattr(self._credentials, "quota_project_id", None)
        return {"x-goog-user-project": quota} if isinstance(quota, str) and quota else {}
