"""What the cloud signers share: a bearer-token flow with one refresh at a time, and the
error a credential failure becomes."""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any

import anyio
import httpx

from polythink.errors import AuthError, redact

__all__ = ["TokenAuth", "auth_error"]


def auth_error(
    provider: str,
    source_index: int | None,
    what: str,
    fix: str,
    exc: BaseException | None = None,
    secrets: tuple[str | None, ...] = (),
) -> AuthError:
    """An :class:`AuthError` saying ``what`` failed and ``fix``; the library's exception, when
    given, is named by class with its words redacted, and is not chained (its attributes may
    hold a token)."""
    detail = ""
    if exc is not None:
        words = " ".join(str(exc).split())[:300]
        detail = f" ({type(exc).__name__}: {redact(words, secrets)})" if words else ""
    return AuthError(
        f"{provider}: {what}{detail}; {fix}",
        provider=provider,
        source_index=source_index,
        error_type="credentials",
    )


class TokenAuth(httpx.Auth):
    """Send ``Authorization: Bearer <token>``.

    With a token provider (a callable the caller gave: plain or async, returning the token)
    it is asked on every request, as the openai SDK asks its ``azure_ad_token_provider``: it
    keeps and refreshes its own token. Otherwise a token is fetched (:meth:`fetch`, by the
    subclass from its cloud library) when there is none or it is within ``refresh_before``
    seconds of its expiry; one fetch runs at a time, and callers that arrive meanwhile wait
    for it and use its token.

    Args:
        provider: the cloud provider id (for messages).
        source_index: the source's position in the client (for errors).
        token_provider: the caller's callable, or ``None``.
        refresh_before: seconds before expiry at which a fetched token is replaced.
        clock: wall-clock seconds (``time.time``), injectable for tests.
    """

    def __init__(
        self,
        *,
        provider: str,
        source_index: int | None,
        token_provider: Callable[[], Any] | None = None,
        refresh_before: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.provider = provider
        self.source_index = source_index
        self._provider = token_provider
        self._token: str | None = None
        self._expires: float | None = None
        self._refresh_before = refresh_before
        self._clock = clock
        self._lock: anyio.Lock | None = None

    @property
    def secret(self) -> str | None:
        """The last token sent (redacted from every error of the source that sent it)."""
        return self._token

    async def fetch(self) -> tuple[str, float | None]:
        """A fresh token and its expiry (wall-clock seconds, ``None`` = none)."""
        raise NotImplementedError

    def extra_headers(self) -> dict[str, str]:
        """Headers sent beside the token (Google's quota project)."""
        return {}

    def _fresh(self) -> bool:
        if self._token is None:
            return False
        expires = self._expires
        return expires is None or self._clock() < expires - self._refresh_before

    async def token(self) -> str:
        """The token for the next request.

        Raises:
            AuthError: the credential could not give one.
        """
        if self._provider is not None:
            return await self._provided()
        if self._fresh():
            assert self._token is not None
            return self._token
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            if not self._fresh():
                token, expires = await self.fetch()
                self._token = token
                self._expires = expires if expires is None or math.isfinite(expires) else None
        assert self._token is not None
        return self._token

    async def _provided(self) -> str:
        assert self._provider is not None
        try:
            token = self._provider()
            if inspect.isawaitable(token):
                token = await token
        except Exception as exc:
            raise auth_error(
                self.provider,
                self.source_index,
                "the token provider given as Source.credentials failed",
                "fix the provider, or give the cloud library's credential object",
                exc,
            ) from None
        if isinstance(token, str):
            self._token = token.strip()
        if not isinstance(token, str) or not token.strip() or not token.isprintable():
            what = (
                "a blank or unprintable string"
                if isinstance(token, str)
                else f"a {type(token).__name__}"
            )
            raise auth_error(
                self.provider,
                self.source_index,
                f"the token provider given as Source.credentials returned {what}",
                "it must return the bearer token as a string",
            )
        return token.strip()

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        token = await self.token()
        request.headers["authorization"] = f"Bearer {token}"
        for name, value in self.extra_headers().items():
            request.headers[name] = value
        yield request

    def sync_auth_flow(self, request: httpx.Request) -> Any:
        raise RuntimeError("polythink's cloud signers run on the async client only")
