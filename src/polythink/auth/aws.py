"""SigV4 signing for Amazon Bedrock, with botocore (``pip install 'polythink[bedrock]'``).

Facts (CLOUDS.md §1.6, botocore 1.44.8 read 2026-12-04):

- Bedrock runtime signs with the service name ``bedrock`` and the host's region.
- ``botocore.auth.SigV4Auth(credentials, service, region).add_auth(AWSRequest(...))`` adds
  ``X-Amz-Date``, ``X-Amz-Security-Token`` (with a session token) and ``Authorization:
  AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…``; the body's hash goes into
  the canonical request only. The canonical path is the request's path URI-encoded once more
  (``%3A`` signs as ``%253A``), so the URL signed must be the URL sent: httpx runs this signer
  on the request it has built, after its own encoding.
- Credentials come from botocore's session (the standard chain: environment, shared config
  and credentials files with ``AWS_PROFILE``, SSO, web identity, container and instance
  roles). They may expire (STS, SSO, roles): ``RefreshableCredentials.get_frozen_credentials``
  refreshes when needed, so it is asked per request, in a worker thread when a refresh is
  due (it may read a file or call a metadata service).
- The Anthropic SDK removes the ``Connection`` header before signing ("may be stripped by a
  proxy"); headers a proxy or the HTTP layer may add or change (``user-agent``,
  ``accept-encoding``, ``content-length``) are not signed here either.
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx

from polythink.auth import missing_library
from polythink.auth._base import auth_error

__all__ = ["SERVICE", "SigV4Auth"]

SERVICE = "bedrock"
"""The SigV4 signing name of ``bedrock-runtime`` (service model ``signingName``)."""

_UNSIGNED = frozenset(
    {
        "connection",
        "user-agent",
        "accept-encoding",
        "content-length",
        "expect",
        "transfer-encoding",
        "x-amzn-trace-id",
        "authorization",
    }
)
_SIGNED_OUT = ("Authorization", "X-Amz-Date", "X-Amz-Security-Token")
_FIX = (
    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), choose a profile "
    "with AWS_PROFILE (run 'aws sso login' for an SSO profile), run where an instance or task "
    "role applies, give Source(credentials=...), or use a Bedrock API key in "
    "AWS_BEARER_TOKEN_BEDROCK"
)


class SigV4Auth(httpx.Auth):
    """Sign each request with SigV4 for Bedrock.

    Args:
        region: the AWS region the request goes to (it is part of the signature).
        credentials: a botocore ``Credentials`` (anything with
            ``get_frozen_credentials()``), a botocore ``Session`` (its chain), or ``None``
            (the default session's chain).
        service: the signing name.
        provider, source_index: for messages.

    Raises:
        ValueError: botocore is not installed.
    """

    requires_request_body = True

    def __init__(
        self,
        *,
        region: str,
        credentials: Any = None,
        service: str = SERVICE,
        provider: str = "bedrock",
        source_index: int | None = None,
    ) -> None:
        try:
            from botocore.auth import SigV4Auth as _Signer
            from botocore.awsrequest import AWSRequest
        except ImportError:
            raise missing_library("bedrock", "botocore", provider) from None
        self.region = region
        self.service = service
        self.provider = provider
        self.source_index = source_index
        self._signer = _Signer
        self._request = AWSRequest
        self._given = credentials
        self._credentials: Any = (
            credentials if hasattr(credentials, "get_frozen_credentials") else None
        )
        self._lock: anyio.Lock | None = None

    async def _frozen(self) -> Any:
        """The credentials to sign this request with (found or refreshed off the loop)."""
        credentials = self._credentials
        if credentials is None:
            if self._lock is None:
                self._lock = anyio.Lock()
            async with self._lock:
                if self._credentials is None:
                    self._credentials = await anyio.to_thread.run_sync(self._find)
            credentials = self._credentials
        refresh_needed = getattr(credentials, "refresh_needed", None)
        try:
            if callable(refresh_needed) and refresh_needed():
                frozen = await anyio.to_thread.run_sync(credentials.get_frozen_credentials)
            else:
                frozen = credentials.get_frozen_credentials()
        except Exception as exc:
            raise auth_error(
                self.provider,
                self.source_index,
                "the AWS credentials could not be refreshed",
                _FIX,
                exc,
            ) from None
        if not frozen.access_key or not frozen.secret_key:
            raise auth_error(
                self.provider, self.source_index, "the AWS credentials have no access key", _FIX
            )
        return frozen

    def _find(self) -> Any:
        import botocore.session

        session = self._given if hasattr(self._given, "get_credentials") else None
        try:
            if session is None:
                session = botocore.session.get_session()
            found = session.get_credentials()
        except Exception as exc:
            raise auth_error(
                self.provider, self.source_index, "the AWS credential chain failed", _FIX, exc
            ) from None
        if found is None:
            raise auth_error(
                self.provider, self.source_index, "no AWS credentials were found", _FIX
            )
        return found

    def sign(self, request: httpx.Request, frozen: Any) -> None:
        """Add the SigV4 headers to ``request`` (built, body read) with ``frozen`` keys."""
        headers = {name: value for name, value in request.headers.items() if name not in _UNSIGNED}
        aws = self._request(
            method=request.method, url=str(request.url), data=request.content, headers=headers
        )
        self._signer(frozen, self.service, self.region).add_auth(aws)
        for name in _SIGNED_OUT:
            value = aws.headers.get(name)
            if value is not None:
                request.headers[name] = value

    async def async_auth_flow(self, request: httpx.Request) -> Any:
        frozen = await self._frozen()
        self.sign(request, frozen)
        yield request

    def sync_auth_flow(self, request: httpx.Request) -> Any:
        raise RuntimeError("polythink's cloud signers run on the async client only")
