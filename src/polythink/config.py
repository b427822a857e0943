"""Sources: which provider, model, endpoint, credentials and limits a client may use.

A :class:`Source` is a frozen value validated when it is built: an unknown provider, an
unknown effort string, an unknown fallback policy or a non-positive limit raise
``ValueError`` there, not on the first call. The API key is never part of ``repr``.

Sources may also come from the environment (:func:`sources_from_env`) or a TOML file
(:func:`sources_from_toml`); both accept a ``[thinking] enabled / effort`` default that
applies to sources without their own ``reasoning_effort``. A default of "off" reaches a model
that cannot switch reasoning off as that model's default tier instead (see
:func:`thinking_default_for`), with one warning per configuration read.
"""

from __future__ import annotations

import logging
import math
import os
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from polythink import clouds
from polythink.errors import ConfigFileNotFoundError, InvalidInputError
from polythink.providers import (
    ALIASES,
    PROVIDERS,
    ProviderProfile,
    canonical_provider,
    get_provider,
    local_base_url,
    suggest_provider,
)
from polythink.reasoning.capabilities import get_capability
from polythink.reasoning.capability import Capability
from polythink.types import PREFIX_MISMATCH, Effort, ServiceTier, fields_repr, redacted
from polythink.wire_json import check_extra_body

if TYPE_CHECKING:
    from polythink.middleware.base import Middleware

__all__ = [
    "ReadLimits",
    "Source",
    "Timeout",
    "check_base_url",
    "check_headers",
    "check_key",
    "check_prefix_mismatch",
    "credential_header",
    "options_from_env",
    "options_from_toml",
    "read_toml",
    "sources_from_env",
    "sources_from_toml",
    "thinking_default_for",
    "toml_table",
    "toml_tables",
]

_log = logging.getLogger("polythink.config")

_OPTIONS = ("limits", "cache")
"""Client options that the environment and a TOML file may give besides the sources."""

_MIDDLEWARE_IN_CODE = (
    " (middleware is code, not configuration: give Client.from_toml(path, middleware=[...]) "
    "for the whole call, or build the Source in code with middleware=[...])"
)

_POLICIES = ("nearest", "error", "drop")
_SECRET_HEADER = re.compile(r"auth|key|token|secret|password|cookie", re.IGNORECASE)


def credential_header(name: str) -> bool:
    """Whether a header named ``name`` carries a credential: its name holds auth, key,
    token, secret, password or cookie (``Authorization``, ``x-api-key``, ``api-key`` …).
    Such values are redacted like keys and never part of a cache key."""
    return _SECRET_HEADER.search(name) is not None


def check_key(key: str, where: str, *, words: bool = False) -> None:
    """Refuse an API key that is blank, or holds whitespace or a control character.

    A key read from a file or a secret store often ends with a newline; sent as it is, it
    fails as a 401 far from its cause, or as an illegal header value. The message says
    what is wrong and where the key came from, never the key. ``words`` allows single
    spaces inside (a credential header such as ``Authorization: Bearer …``).

    Raises:
        ValueError: naming ``where`` and the problem.
    """
    spaced = key == key.strip() and "  " not in key if words else " " not in key
    if key.isascii() and key.isprintable() and spaced:
        return
    if not key.strip():
        problem = "is only whitespace"
    elif key != key.strip():
        end = key[-1] if key != key.rstrip() else key[0]
        side = "ends" if key != key.rstrip() else "starts"
        what = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab"}.get(end, "a space")
        problem = f"{side} with {what}"
    else:
        problem = "holds whitespace, a control character or a non-ASCII character inside it"
    raise InvalidInputError(
        f"{where} {problem}; an API key is one printable ASCII token: remove the whitespace "
        "(for example a newline left by the file it was read from). The key is not shown"
    )


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An HTTP field name: a token (RFC 9110 §5.1, §5.6.2)."""
_FIELD_VALUE = re.compile(r"(?:[\x21-\x7e](?:[ \t]*[\x21-\x7e])*)?")
"""An HTTP field value polythink sends: visible ASCII, spaces and tabs only inside it (RFC 9110
§5.5 without obs-text; h11, under httpx, refuses whitespace at either end too)."""


def check_headers(headers: Mapping[str, str] | None, where: str) -> None:
    """Refuse header names and values that are not valid HTTP, never echoing a value.

    A name is a token (letters, digits and ``!#$%&'*+-.^_`|~``); a value is printable ASCII
    with spaces and tabs only inside it. httpx refuses the others on every call, and its
    DEBUG log quotes the value it refused; aiohttp sends some of them as they are (a name
    with a space), and a CR or LF in a value would split it into a second header.

    Raises:
        ValueError: naming ``where``, the header (for a bad name, only its part before the
            first illegal character) and the character at fault; never the value.
    """
    for name, value in (headers or {}).items():
        if not _TOKEN.fullmatch(name):
            bad = next((i for i, c in enumerate(name) if not _TOKEN.fullmatch(c)), 0)
            shown = f"{name[:bad]!r} followed by {_character(name[bad])}" if name else "empty"
            raise InvalidInputError(
                f"{where}: a header name is a token of letters, digits and "
                f"!#$%&'*+-.^_`|~ (no spaces, colons or control characters); got a name "
                f"{shown}"
            )
        if not _FIELD_VALUE.fullmatch(value):
            wrong = next((c for c in value if not ("\x21" <= c <= "\x7e" or c in " \t")), None)
            problem = (
                f"holds {_character(wrong)}"
                if wrong is not None
                else "starts or ends with whitespace"
            )
            raise InvalidInputError(
                f"{where}[{name!r}] {problem}; a header value is printable ASCII, with spaces "
                "and tabs only inside it. The value is not shown"
            )


def _character(c: str) -> str:
    named = {"\r": "a carriage return", "\n": "a line feed", "\t": "a tab", " ": "a space"}
    if c in named:
        return named[c]
    if c.isascii() and c.isprintable():
        return repr(c)
    if "\ud800" <= c <= "\udfff":
        return f"a lone surrogate (U+{ord(c):04X}, not valid Unicode)"
    kind = "a control character" if c.isascii() or not c.isprintable() else "a non-ASCII character"
    return f"{kind} (U+{ord(c):04X})"


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]{0,9}")
"""A scheme shown in an error: a short one (``ftp``, ``ws``, ``unix``); a longer text before
``://`` may be anything, a key included."""


def check_base_url(url: object, where: str) -> str:
    """Return ``url`` without its trailing ``/`` once it is a usable endpoint root.

    An ``http://`` or ``https://`` URL with a host, an optional port from 1 to 65535 and a
    path; no user information (``user:key@``: httpx would send it and log the URL, key
    included, at INFO), query (a key such as Google's ``?key=``) or fragment, whitespace or
    control character. The message names what is wrong, never user information, a query, the
    host, the port's text or the path (any of them may hold a key).

    Raises:
        ValueError: naming ``where``, what is wrong and what is accepted.
    """
    example = "an http:// or https:// URL such as 'https://api.openai.com/v1'"
    if not isinstance(url, str):
        raise InvalidInputError(f"{where} must be {example}; got a {type(url).__name__}")
    scheme, _, rest = url.partition("://") if "://" in url else ("", "", url)
    authority, *path = re.split(r"([/?#])", rest, maxsplit=1)
    if "@" in authority:
        raise InvalidInputError(
            f"{where} must not carry user information (user:password@): give a key as "
            f"api_key= or headers=; got {scheme}://...@{authority.rpartition('@')[2]}"
            f"{''.join(path).partition('?')[0]} (the user information is not shown)"
        )
    bad = next((c for c in url if c.isspace() or not c.isprintable()), None)
    if bad is not None:
        raise InvalidInputError(f"{where} holds {_character(bad)}; expected {example}")
    root, mark, _ = url.partition("?")
    root, hash_mark, _ = root.partition("#")
    if mark or hash_mark:
        # Not echoed whole: a query often carries a key (Google's ?key=).
        raise InvalidInputError(
            f"{where} must not carry a query (?...) or fragment (#...): polythink appends the "
            f"API path to it; got {root!r} followed by {mark or hash_mark}... (give a key as "
            "api_key= or headers=)"
        )
    if not url.startswith(("http://", "https://")):
        shown = repr(scheme) if _SCHEME.fullmatch(scheme) else "no scheme" if not scheme else None
        raise InvalidInputError(
            f"{where}'s scheme must be http or https; "
            + (f"got {shown}" if shown else "got a scheme that is not shown")
            + f" (expected {example})"
        )
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as exc:
        words = str(exc) if authority not in str(exc) else "its host cannot be read"
        raise InvalidInputError(
            f"{where} is not a valid URL ({words}); expected {example}"
        ) from None
    if not parts.hostname:
        raise InvalidInputError(f"{where} has no host; expected {example}")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0 or (port is None and parts.netloc.endswith(":")):
        raise InvalidInputError(
            f"{where}'s port is not a number from 1 to 65535 (what follows the host's ':' is "
            f"not shown); expected {example}"
        )
    return url.rstrip("/")


ROOT_ENV = "POLYTHINK_BASE_URL_ROOT"
"""The variable naming one server for every provider, each under its own path
(:func:`~polythink.providers.local_base_url`): ``polythink simulate``'s
``http://127.0.0.1:8787``, so any program's sources reach the simulator unchanged."""


def _base_url_from_env(provider: str) -> str | None:
    """The base URL the provider's official SDK would read from the environment
    (``ProviderProfile.base_url_env``: ``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL`` …, with the
    path that SDK appends), else the provider's path under :data:`ROOT_ENV`, or ``None``.

    Raises:
        ValueError: the variable is not a usable URL (:func:`check_base_url`, naming it).
    """
    profile = get_provider(provider)
    found = profile.base_url_env
    if found is not None:
        name, path = found
        value = os.environ.get(name)
        if value:
            return check_base_url(value.strip(), f"${name}") + path
    root = os.environ.get(ROOT_ENV)
    if not root:
        return None
    return local_base_url(check_base_url(root.strip(), f"${ROOT_ENV}"), profile)


def check_prefix_mismatch(value: Any, where: str) -> None:
    """Refuse a ``prefix_mismatch`` that is not ``None``, ``"error"`` or ``"drop_block"``.

    Raises:
        ValueError: naming ``where`` and the accepted values.
    """
    if value is not None and value not in PREFIX_MISMATCH:
        raise InvalidInputError(
            f"{where} must be one of {', '.join(map(repr, PREFIX_MISMATCH))} or None (what "
            "Anthropic does with a thinking block bound to a different conversation); got "
            f"{value!r}"
        )


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _finite_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True, slots=True)
class Timeout:
    """Timeouts of one source, in seconds; ``None`` disables one.

    Attributes:
        connect: to establish the connection (TCP + TLS); also bounds writing the request
            and waiting for a free pooled connection.
        first_byte: from sending the request to the first byte of the response. ``None``
            (the default): a streamed call waits for its head at most ``idle``, and a
            non-streamed call — whose first byte comes only once the model has finished
            reasoning and answering — only up to ``total``, so a long answer is not cut off
            and paid for again on retry.
        idle: longest silence between two chunks of a streamed response.
        total: deadline for the whole call on this source: every attempt, the waits between
            them, and a stream to its last chunk. A per-call ``timeout`` replaces it.

    Raises:
        ValueError: for a value that is not a positive, finite number or ``None``.
    """

    connect: float | None = 5.0
    first_byte: float | None = None
    idle: float | None = 120.0
    total: float | None = 600.0

    def __post_init__(self) -> None:
        for name in ("connect", "first_byte", "idle", "total"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not 0 < value < math.inf
            ):
                raise InvalidInputError(
                    f"Timeout.{name} must be a positive number of seconds or None; got {value!r}"
                )

    @classmethod
    def coerce(cls, value: Timeout | float | None) -> Timeout:
        """Accept a ``Timeout``, a number (the total deadline, in seconds), or ``None``.

        Raises:
            ValueError: for a non-positive number or another type.
        """
        if value is None:
            return cls()
        if isinstance(value, Timeout):
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidInputError(
                f"timeout must be seconds (a number) or a Timeout; got {value!r}"
            )
        return cls(total=float(value))


MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ReadLimits:
    """How much of an answer one source may send before polythink stops reading it.

    An answer past a limit is not read further: the call raises
    :class:`~polythink.errors.ResponseTooLargeError` naming the limit (a
    :class:`~polythink.errors.TransientError` that is not retried; failover moves on).
    Memory held for one answer stays within about these sizes, and the time spent on it
    grows linearly with what arrives.

    The defaults are far above what a provider sends for one answer today: the longest output
    of the December 2026 lineup is 128K tokens (under 1 MB of text; about 20 MB as stream
    events), and a streamed image of 4K pixels is about 27 MB of base64 in one event.

    Attributes:
        max_line: characters in one line of a server-sent-events stream (32 MiB).
        max_event: characters of one event's data, its ``data:`` lines joined (32 MiB).
        max_body: bytes received for one answer as they come off the connection, streamed or
            not (128 MiB). A ``content-length`` above it is refused before the body is read.
        max_decoded: bytes of the body once its ``content-encoding`` (gzip, deflate, br,
            zstd) is undone (128 MiB): a small compressed body that expands without bound
            stops here.

    Raises:
        ValueError: a value that is not a positive whole number.
    """

    max_line: int = 32 * MiB
    max_event: int = 32 * MiB
    max_body: int = 128 * MiB
    max_decoded: int = 128 * MiB

    def __post_init__(self) -> None:
        for name in ("max_line", "max_event", "max_body", "max_decoded"):
            value = getattr(self, name)
            if not (_integer(value) and value > 0):
                raise InvalidInputError(
                    f"ReadLimits.{name} must be a positive whole number; got {value!r}"
                )


@dataclass(frozen=True, slots=True)
class Source:
    """One place a client may send a call: provider, model, endpoint, credentials, limits.

    Every field after ``model`` is keyword-only: ``Source("openai", "gpt-5.5", "high")`` raises
    ``TypeError`` rather than taking ``"high"`` as the key.

    Args:
        provider: a provider id (``openai``, ``anthropic``, ``gemini``, ``openrouter`` …).
        model: the model id as the provider names it.
        api_key: the key; ``None`` reads the provider's standard environment variable.
        base_url: the endpoint root, without query or fragment (polythink appends the API
            path); ``None`` uses the variable the provider's official SDK reads when it is set
            (``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``, ``GOOGLE_GEMINI_BASE_URL``,
            ``GROQ_BASE_URL``: ``ProviderProfile.base_url_env``), else the provider's default.
        reasoning_effort: this source's default tier (``Effort``, string alias, bool or
            ``None`` = unset); a per-call value wins.
        effort_fallback: ``nearest`` | ``error`` | ``drop`` for tiers the model lacks.
        rpm, tpm, max_concurrency: requests per minute, tokens per minute, calls in flight.
        timeout: a :class:`Timeout`, or a number of seconds for the total deadline.
        max_retries: retries after the first attempt (``None`` = the default, 2).
        headers: extra HTTP headers for every call to this source (left out of ``repr``:
            they may carry credentials).
        drop_params: drop parameters the provider would reject here, with one warning,
            instead of raising :class:`~polythink.errors.RequestRejectedError`.
        extra_body: provider-specific body fields merged into every request (last, so they
            win; part of the cache key). In ``repr``, credential fields (``api_key``,
            ``access_token`` …) and values holding a key show as ``[REDACTED]``.
        api_version: the provider API version this source sends, where the provider has
            versions a client chooses (``ProviderProfile.api_versions``): Anthropic
            ``2026-10-21`` (the default: what the current official SDKs send; it refuses
            ``temperature``, ``top_p`` and ``top_k``) or ``2023-06-01`` (for a model that still
            takes non-default sampling values). ``None`` = the provider's default.
        thinking_display: Anthropic ``thinking.display`` whenever thinking is on:
            ``summarized`` (the reasoning text comes back) or ``omitted`` (thinking blocks
            arrive with empty text and a signature: the first answer token comes sooner).
            ``None`` = ``summarized`` where the model omits it by default, else the model's
            own default.
        reasoning_mode: OpenAI Responses ``reasoning.mode`` (``standard`` or ``pro``: more
            compute at the same tier, the replacement of the retired ``-pro`` models) on
            models that take it (``Capability.reasoning_modes``; GPT-5.6 and later). An
            ``openai`` source sends such calls to the Responses API. ``None`` = not sent.
        read_limits: how much of one answer this source may send (:class:`ReadLimits`: a
            line, an event, the body, the decompressed body).
        prefix_mismatch: what Anthropic does with a replayed thinking block that fails its
            prefix check ("bound to a different conversation": the system prompt, the tools
            or an earlier message changed since the block was made; CONTINUITY.md §1.3):
            ``None`` (the API's default: a 400 on the models and accounts that enforce the
            check, raised as :class:`~polythink.errors.ThinkingBindingError`); ``"error"``
            (sent as ``thinking.block_binding.prefix_mismatch_behavior``: the 400 on every
            account); ``"drop_block"`` (the API may drop such blocks: a call is sent as by
            default, and when the API refuses a block polythink sends it once more with
            ``drop_block``, as Anthropic documents, and the conversation keeps sending it:
            :attr:`~polythink.MessageMetadata.prefix_mismatch`). Models that keep thinking
            from older accounts keep it this way; the response's
            ``input_transformations`` and warnings say what was dropped. A per-call value
            wins; ``Client(prefix_mismatch=)`` and ``[thinking] prefix_mismatch`` of a
            TOML file give the default of sources without their own.
        service_tier: this source's default service tier (``flex``, ``standard``,
            ``priority``, ``auto``, a :class:`~polythink.types.ServiceTier`, or ``None`` =
            unset: nothing sent); a per-call ``service_tier`` wins. Sent as the provider
            spells it (see :func:`polythink.reasoning.tiers.resolve_tier`).
        service_tier_fallback: ``nearest`` | ``error`` | ``drop`` for a tier the provider or
            model does not take, as ``effort_fallback`` is for reasoning tiers.
        capacity_fallback: the tier a call is sent again at, once, when the provider answers
            that its tier has no capacity now (OpenAI's 429 ``resource_unavailable`` on flex,
            Groq's 498): ``standard`` by default; ``None`` (or ``"none"``): raise
            :class:`~polythink.errors.CapacityUnavailableError` instead, which the retry
            layer retries with backoff at the same tier.
        middleware: layers of the caller's own around each attempt on this source, outermost
            first, just outside its transport: each sees the request as it will be sent here
            (``request.resolution`` holds the applied tier), and that attempt's response or
            error, once per retry and per failover hop (see :class:`~polythink.Middleware`).
            Code, not configuration: not compared, not in ``repr``, never read from the
            environment or a TOML file.
        region: the cloud region: Bedrock's AWS region (``us-east-1``; else ``AWS_REGION``,
            else ``AWS_DEFAULT_REGION``), or Vertex AI's location (``global``, ``us``, ``eu``,
            ``us-central1``; else ``GOOGLE_CLOUD_LOCATION``, else ``CLOUD_ML_REGION``, else
            ``global``). ``None`` on other providers.
        project: the Google Cloud project of a ``vertex`` source (else
            ``GOOGLE_CLOUD_PROJECT``, else ``ANTHROPIC_VERTEX_PROJECT_ID``); not needed with a
            Vertex express-mode API key.
        base_model: the model this source's id serves, when the id does not say: an Azure
            deployment name (``"prod-chat"`` serving ``gpt-5.5``), a Bedrock application
            inference profile ARN. Reasoning rules, prices and lifecycle then follow it.
            ``None``: the id itself (on Azure, the model an answer reports is used from then
            on when the deployment's name is not a model the registry knows).
        credentials: the cloud credential to use instead of the standard chain, as the
            cloud's own library makes it: a botocore ``Credentials`` or ``Session``
            (``bedrock``), a google-auth ``Credentials`` (``vertex``), an azure-identity
            ``TokenCredential`` (``azure``), or a callable returning a bearer token
            (``vertex``, ``azure``; it may be async). Code, not configuration: not compared,
            not in ``repr``. See :mod:`polythink.auth`.

    Raises:
        ValueError: for an unknown provider, effort or policy, or a non-positive limit.
    """

    provider: str
    model: str
    _: KW_ONLY
    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = None
    reasoning_effort: Effort | str | bool | None = None
    effort_fallback: str = "nearest"
    rpm: float | None = None
    tpm: float | None = None
    max_concurrency: int | None = None
    timeout: Timeout | float | None = None
    max_retries: int | None = None
    headers: Mapping[str, str] | None = field(default=None, repr=False)
    drop_params: bool = False
    extra_body: Mapping[str, Any] | None = None
    api_version: str | None = None
    thinking_display: str | None = None
    reasoning_mode: str | None = None
    service_tier: ServiceTier | str | None = None
    service_tier_fallback: str = "nearest"
    capacity_fallback: ServiceTier | str | None = ServiceTier.STANDARD
    middleware: Sequence[Middleware] = field(default=(), repr=False, compare=False)
    prefix_mismatch: str | None = None
    region: str | None = None
    project: str | None = None
    base_model: str | None = None
    credentials: Any = field(default=None, repr=False, compare=False)
    read_limits: ReadLimits = field(default=ReadLimits(), repr=False)

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        # The dataclass's own message ("takes 3 positional arguments but 4 were given")
        # does not say which ones; the values are never echoed (one may be a key).
        if len(args) > 2:
            raise TypeError(
                f"Source takes provider and model positionally and every other field by "
                f"keyword (api_key=, base_url=, reasoning_effort=, ...); got {len(args)} "
                "positional arguments"
            )
        return object.__new__(cls)

    def __post_init__(self) -> None:
        if isinstance(self.provider, str):
            object.__setattr__(self, "provider", canonical_provider(self.provider))
        get_provider(self.provider)
        if not isinstance(self.model, str) or not self.model.strip():
            raise InvalidInputError("Source.model must be a non-empty model id")
        bad = next((c for c in self.model if c.isspace() or not c.isprintable()), None)
        if bad is not None:
            # A line break would end a header or a log line early; a model id has no spaces.
            raise InvalidInputError(
                f"Source.model holds {_character(bad)}; a model id is printable characters "
                f"without spaces (got {self.model!r})"
            )
        self._check_cloud()
        object.__setattr__(self, "reasoning_effort", Effort.parse(self.reasoning_effort))
        if self.effort_fallback not in _POLICIES:
            raise InvalidInputError(
                f"Source.effort_fallback must be one of {', '.join(_POLICIES)}; "
                f"got {self.effort_fallback!r}"
            )
        try:
            object.__setattr__(self, "service_tier", ServiceTier.parse(self.service_tier))
        except ValueError as exc:
            raise InvalidInputError(f"Source.service_tier: {exc}") from None
        if self.service_tier_fallback not in _POLICIES:
            raise InvalidInputError(
                f"Source.service_tier_fallback must be one of {', '.join(_POLICIES)}; "
                f"got {self.service_tier_fallback!r}"
            )
        spare = self.capacity_fallback
        if isinstance(spare, str) and spare.strip().lower() in ("none", "off"):
            spare = None
        try:
            spare = ServiceTier.parse(spare)
        except ValueError as exc:
            raise InvalidInputError(
                f"Source.capacity_fallback: {exc} ('none' for no resend)"
            ) from None
        if spare is ServiceTier.AUTO:
            raise InvalidInputError(
                "Source.capacity_fallback must be flex, standard, priority or None; got 'auto' "
                "(the tier to send a call again at when its own has no capacity)"
            )
        object.__setattr__(self, "capacity_fallback", spare)
        for name in ("rpm", "tpm"):
            value = getattr(self, name)
            if value is not None and not (_finite_number(value) and value > 0):
                raise InvalidInputError(
                    f"Source.{name} must be a positive finite number or None; got {value!r}"
                )
        if self.max_concurrency is not None and not (
            _integer(self.max_concurrency) and self.max_concurrency > 0
        ):
            raise InvalidInputError(
                f"Source.max_concurrency must be a positive int or None; "
                f"got {self.max_concurrency!r}"
            )
        if self.max_retries is not None and not (
            _integer(self.max_retries) and self.max_retries >= 0
        ):
            raise InvalidInputError(
                f"Source.max_retries must be an int >= 0 or None; got {self.max_retries!r}"
            )
        if not isinstance(self.drop_params, bool):
            raise InvalidInputError(
                f"Source.drop_params must be True or False; got {self.drop_params!r}"
            )
        if self.api_key is not None and not isinstance(self.api_key, str):
            raise InvalidInputError("Source.api_key must be a string or None")
        if self.api_key:
            check_key(self.api_key, "Source.api_key")
        if self.headers is not None and not (
            isinstance(self.headers, Mapping)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in self.headers.items())
        ):
            raise InvalidInputError(
                "Source.headers must be a dict of header names to string values"
            )
        for name, value in (self.headers or {}).items():
            if credential_header(name):
                check_key(value, f"Source.headers[{name!r}]", words=True)
        check_headers(self.headers, "Source.headers")
        check_extra_body(self.extra_body, "Source.extra_body")
        check_prefix_mismatch(self.prefix_mismatch, "Source.prefix_mismatch")
        self._check_options()
        layers = self.middleware
        if isinstance(layers, str | bytes) or not isinstance(layers, Sequence):
            raise InvalidInputError(
                "Source.middleware must be a list of layers; got "
                f"{type(layers).__name__}"
                + ("; wrap the one layer: [layer]" if hasattr(layers, "complete") else "")
            )
        object.__setattr__(self, "middleware", tuple(layers))
        object.__setattr__(self, "timeout", Timeout.coerce(self.timeout))
        if not isinstance(self.read_limits, ReadLimits):
            raise InvalidInputError(
                "Source.read_limits must be a polythink.ReadLimits; got "
                f"{type(self.read_limits).__name__}"
            )
        if self.base_url is not None:
            object.__setattr__(self, "base_url", check_base_url(self.base_url, "Source.base_url"))
        else:
            object.__setattr__(self, "base_url", _base_url_from_env(self.provider))

    def __repr__(self) -> str:
        """The fields as the dataclass shows them, without the key, headers and middleware;
        in ``extra_body``, credential fields and values holding a key are ``[REDACTED]``
        (:func:`~polythink.types.redacted`)."""
        secrets = [
            self.api_key,
            *(v for n, v in (self.headers or {}).items() if credential_header(n)),
        ]
        return fields_repr(self, extra_body=redacted(self.extra_body, secrets))

    def _check_cloud(self) -> None:
        """``region``, ``project``, ``base_model`` and ``credentials`` where they mean
        something, as strings where they are strings."""
        cloud = get_provider(self.provider).cloud
        for name in ("region", "project", "base_model"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise InvalidInputError(
                    f"Source.{name} must be a non-empty string or None; got {value!r}"
                )
        if self.region is not None and cloud not in ("aws", "google"):
            raise InvalidInputError(
                f"Source.region is for the bedrock and vertex providers; provider "
                f"{self.provider!r} takes its endpoint as base_url"
            )
        if self.project is not None and cloud != "google":
            raise InvalidInputError(
                f"Source.project is the Google Cloud project of a vertex source; provider "
                f"{self.provider!r} has none"
            )
        if self.credentials is not None and cloud is None:
            raise InvalidInputError(
                f"Source.credentials is for the cloud providers (bedrock, vertex, azure); "
                f"provider {self.provider!r} takes api_key="
            )

    def _check_options(self) -> None:
        """``api_version``, ``thinking_display`` and ``reasoning_mode`` against what the
        provider offers (its profile), naming what is accepted."""
        profile = self.profile
        dated = (
            profile.cloud == "azure"
            and isinstance(self.api_version, str)
            and clouds.dated_api_version(self.api_version)
        )
        for name, accepted in (
            ("api_version", () if dated else profile.api_versions),
            ("thinking_display", profile.thinking_displays),
            ("reasoning_mode", ("standard", "pro") if profile.reasoning_modes else ()),
        ):
            value = getattr(self, name)
            if value is None or value in accepted or (dated and name == "api_version"):
                continue
            if not accepted:
                raise InvalidInputError(
                    f"Source.{name} is not available on provider {profile.id!r} (it has no "
                    f"{name} to choose); got {value!r}"
                )
            date = " or a dated api-version such as '2025-04-01-preview'"
            raise InvalidInputError(
                f"Source.{name} must be one of {', '.join(accepted)}"
                f"{date if profile.cloud == 'azure' and name == 'api_version' else ''} "
                f"(or None); got {value!r}"
            )

    @property
    def api_version_sent(self) -> str | None:
        """The API version this source sends: ``api_version``, else the provider's default."""
        versions = self.profile.api_versions
        return self.api_version or (versions[0] if versions else None)

    @property
    def registry_model(self) -> str:
        """The id the capability registry and the price table know this source's model by:
        ``base_model``, else ``model``."""
        return self.base_model or self.model

    @property
    def registry_provider(self) -> str | None:
        """The provider the registry reads :attr:`registry_model` for: ``None`` for a
        ``base_model`` (a model id, read by its shape), else the source's provider (an Azure
        id is a deployment name, which names no model)."""
        return None if self.base_model else self.provider

    @property
    def capability(self) -> Capability | None:
        """The registry's entry for this source's model (:attr:`registry_model` on
        :attr:`registry_provider`), or ``None``."""
        return get_capability(self.registry_model, self.registry_provider)

    @property
    def profile(self) -> ProviderProfile:
        """The profile that serves this source: the provider's own, or the one its
        ``vendor_routes`` give for the model's vendor
        (:func:`polythink.clouds.serving_profile`)."""
        return clouds.serving_profile(self.provider, self.model, self.base_model)

    @property
    def vendor(self) -> str | None:
        """The vendor of this source's model (:func:`polythink.clouds.vendor_of`)."""
        return clouds.vendor_of(self.model, self.base_model)

    @property
    def effort(self) -> Effort | None:
        """``reasoning_effort`` as a parsed :class:`Effort` (``None`` = unset)."""
        value = self.reasoning_effort
        return value if isinstance(value, Effort) or value is None else Effort.parse(value)

    @property
    def tier(self) -> ServiceTier | None:
        """``service_tier`` as a parsed :class:`~polythink.types.ServiceTier` (``None`` =
        unset)."""
        value = self.service_tier
        return (
            value if isinstance(value, ServiceTier) or value is None else ServiceTier.parse(value)
        )

    @property
    def spare_tier(self) -> ServiceTier | None:
        """``capacity_fallback`` as a parsed tier (``None``: no resend on "no capacity")."""
        value = self.capacity_fallback
        return (
            value if isinstance(value, ServiceTier) or value is None else ServiceTier.parse(value)
        )

    @property
    def timeouts(self) -> Timeout:
        """``timeout`` as a :class:`Timeout`."""
        value = self.timeout
        return value if isinstance(value, Timeout) else Timeout.coerce(value)

    @property
    def endpoint(self) -> str:
        """The base URL in use: ``base_url`` or the provider's default.

        On the clouds, the root their paths are appended to: Bedrock's regional runtime
        host; Vertex's ``…/v1/projects/{project}/locations/{location}`` (``base_url``, when
        given, stands for ``https://{host}/v1``), or ``…/v1`` alone in express mode (an API
        key and no project); Azure's ``{resource}/openai/v1``, or ``{resource}/openai`` for a
        dated ``api_version`` (``base_url`` else ``AZURE_OPENAI_ENDPOINT``).

        Raises:
            ValueError: a cloud setting the endpoint needs is missing or malformed, naming
                where to set it.
        """
        profile = get_provider(self.provider)
        cloud = profile.cloud
        if cloud is None:
            return self.base_url or profile.base_url
        if cloud == "aws":
            return self.base_url or clouds.bedrock_endpoint(self.aws_region)
        if cloud == "google":
            if self.resolve_api_key() is not None:
                return self.base_url or clouds.vertex_express_endpoint()
            project = self.vertex_project
            if project is None:
                raise InvalidInputError(
                    f"the vertex source {self.model!r} needs a Google Cloud project: set "
                    "Source(project=...) or GOOGLE_CLOUD_PROJECT (or give an express-mode API "
                    "key as api_key=)"
                )
            return clouds.vertex_endpoint(project, self.vertex_location, self.base_url)
        base = self.base_url
        if base is None:
            given = clouds.first_env(clouds.AZURE_ENDPOINT_ENV)
            if given is None:
                raise InvalidInputError(
                    f"the azure source {self.model!r} needs its resource endpoint: set "
                    "Source(base_url='https://<resource>.openai.azure.com') or "
                    "AZURE_OPENAI_ENDPOINT"
                )
            base = check_base_url(given, "$AZURE_OPENAI_ENDPOINT")
        return clouds.azure_api_root(base, self.api_version)

    @property
    def aws_region(self) -> str:
        """The AWS region of a ``bedrock`` source: ``region``, else ``AWS_REGION``, else
        ``AWS_DEFAULT_REGION``, else the one in ``base_url``'s host
        (``bedrock-runtime.{region}.amazonaws.com``).

        Raises:
            ValueError: none of them names one.
        """
        found = self.region or clouds.first_env(clouds.AWS_REGION_ENV)
        if found is None and self.base_url is not None:
            match = re.search(r"\.([a-z]{2}(?:-[a-z]+)+-[0-9]{1,2})\.", self.base_url)
            found = match[1] if match else None
        if found is None:
            raise InvalidInputError(
                f"the bedrock source {self.model!r} needs an AWS region: set "
                "Source(region='us-east-1') or AWS_REGION"
            )
        return found

    @property
    def vertex_project(self) -> str | None:
        """The Google Cloud project of a ``vertex`` source: ``project``, else
        ``GOOGLE_CLOUD_PROJECT``, else ``ANTHROPIC_VERTEX_PROJECT_ID``; ``None`` when unset."""
        return self.project or clouds.first_env(clouds.VERTEX_PROJECT_ENV)

    @property
    def vertex_location(self) -> str:
        """The Vertex location of a ``vertex`` source: ``region``, else
        ``GOOGLE_CLOUD_LOCATION``, else ``CLOUD_ML_REGION``, else ``global``."""
        return self.region or clouds.first_env(clouds.VERTEX_LOCATION_ENV) or "global"

    def resolve_api_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        """Return ``api_key``, else the first set environment variable of the provider.

        On Vertex the environment's key (``GOOGLE_API_KEY``, express mode) is read only when
        no project is configured, as google-genai does: a project means OAuth; and never for
        Claude there (``rawPredict`` takes no API key).

        Raises:
            ValueError: the variable's key is blank or has whitespace (see :func:`check_key`).
        """
        if self.api_key:
            return self.api_key
        env = os.environ if environ is None else environ
        profile = get_provider(self.provider)
        if profile.cloud == "google" and (
            self.project is not None
            or clouds.first_env(clouds.VERTEX_PROJECT_ENV, env) is not None
            or not self.profile.api_key_env
        ):
            return None
        for name in profile.api_key_env:
            value = env.get(name)
            if value:
                check_key(value, f"the API key in ${name}")
                return value
        return None

    def secrets(self) -> tuple[str, ...]:
        """The credentials this source holds: its key, and header values whose names say
        they carry one (``authorization``, ``api-key``, anything with key, token, secret or
        password). Redacted from every error body and telemetry record."""
        found = [key] if (key := self.resolve_api_key()) else []
        for name, value in (self.headers or {}).items():
            if credential_header(name) and value:
                found.append(value)
        return tuple(found)


_ENV_KEY = re.compile(
    r"^(?P<scope>[A-Z0-9_]+?)__(?P<provider>[A-Z0-9_\-]+)__(?P<n>\d+)__(?P<field>[A-Z_]+)$"
)
_FIELDS = {
    "MODEL": "model",
    "API_KEY": "api_key",
    "BASE_URL": "base_url",
    "REASONING_EFFORT": "reasoning_effort",
    "EFFORT_FALLBACK": "effort_fallback",
    "RPM": "rpm",
    "TPM": "tpm",
    "MAX_CONCURRENCY": "max_concurrency",
    "TIMEOUT": "timeout",
    "MAX_RETRIES": "max_retries",
    "DROP_PARAMS": "drop_params",
    "ENABLE_THINKING": "enable_thinking",
    "API_VERSION": "api_version",
    "THINKING_DISPLAY": "thinking_display",
    "REASONING_MODE": "reasoning_mode",
    "PREFIX_MISMATCH": "prefix_mismatch",
    "SERVICE_TIER": "service_tier",
    "SERVICE_TIER_FALLBACK": "service_tier_fallback",
    "CAPACITY_FALLBACK": "capacity_fallback",
    "REGION": "region",
    "PROJECT": "project",
    "BASE_MODEL": "base_model",
}
_INTS = {"max_concurrency", "max_retries"}
_FLOATS = {"rpm", "tpm", "timeout"}


def _provider_from_env(name: str) -> str:
    wanted = name.lower().replace("_", "-")
    for pid in PROVIDERS:
        if pid == wanted or pid.replace("-", "_") == name.lower():
            return pid
    if wanted in ALIASES:
        return ALIASES[wanted]
    raise InvalidInputError(
        f"unknown provider {name!r} in environment{suggest_provider(wanted)}; known: "
        f"{', '.join(PROVIDERS)}"
    )


def _convert(field_name: str, raw: Any, where: str) -> Any:
    if field_name in _INTS:
        try:
            return int(raw)
        except (TypeError, ValueError):
            raise InvalidInputError(f"{where}: expected an integer, got {raw!r}") from None
    if field_name in _FLOATS:
        try:
            return float(raw)
        except (TypeError, ValueError):
            raise InvalidInputError(f"{where}: expected a number, got {raw!r}") from None
    if field_name in ("drop_params", "enable_thinking") and isinstance(raw, str):
        lowered = raw.strip().lower()
        if lowered not in ("true", "false", "1", "0", "yes", "no"):
            raise InvalidInputError(f"{where}: expected true or false, got {raw!r}")
        return lowered in ("true", "1", "yes")
    return raw


def _effort(value: Any, where: str) -> Effort | None:
    try:
        return Effort.parse(value)
    except ValueError as exc:
        raise InvalidInputError(f"{where}: {exc}") from None


def _flag(value: Any, name: str, where: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise InvalidInputError(f"{where}: {name} must be true or false; got {value!r}")


_THINKING_KEYS = ("effort", "enabled", "prefix_mismatch")


def _thinking_mismatch(thinking: Mapping[str, Any] | None, where: str) -> str | None:
    """``[thinking] prefix_mismatch``: the default of sources without their own."""
    value = (thinking or {}).get("prefix_mismatch")
    check_prefix_mismatch(value, f"{where} prefix_mismatch")
    return value


def _thinking_default(thinking: Mapping[str, Any] | None, where: str) -> Effort | None:
    if not thinking:
        return None
    unknown = set(thinking) - set(_THINKING_KEYS)
    if unknown:
        raise InvalidInputError(
            f"{where}: unknown keys {sorted(unknown)}; known: {list(_THINKING_KEYS)}"
        )
    enabled = _flag(thinking.get("enabled"), "enabled", where)
    effort = _effort(thinking.get("effort"), where)
    if enabled is False and effort not in (None, Effort.NONE):
        raise InvalidInputError(f"{where}: enabled = false contradicts effort = {effort.value!r}")
    if enabled is True and effort is Effort.NONE:
        raise InvalidInputError(f"{where}: enabled = true contradicts effort = 'none'")
    if enabled is False:
        return Effort.NONE
    if effort is not None:
        return effort
    return Effort.AUTO if enabled else None


def thinking_default_for(default: Effort | None, model: str) -> Effort | None:
    """Return the configuration-wide ``[thinking]`` default as it applies to ``model``.

    The ``[thinking]`` table speaks for many sources at once, so "off" (``enabled = false``
    or ``effort = "none"``) is read as "as little as each model allows": a registered model
    that cannot switch reasoning off gets its default tier instead (its declared
    ``default_effort``, else the middle of its strength tiers, else ``auto``; see
    :attr:`~polythink.reasoning.capabilities.Capability.default_tier`). Every other default,
    and every model that can switch off or is not registered, is returned unchanged. This
    is the only place the clamp happens; a ``none`` set on a source itself or on a call is
    never clamped and still raises :class:`~polythink.errors.ThinkingUnsupportedError`.
    """
    if default is not Effort.NONE:
        return default
    cap = get_capability(model)
    if cap is None or cap.can_disable or cap.default_tier is None:
        return default
    return cap.default_tier


def _build(
    fields: dict[str, Any],
    provider: str,
    where: str,
    default: Effort | None,
    clamped: list[str],
    mismatch: str | None = None,
) -> Source:
    enable = _flag(fields.pop("enable_thinking", None), "enable_thinking", where)
    effort = _effort(fields.get("reasoning_effort"), where)
    if enable is not None:
        implied = Effort.AUTO if enable else Effort.NONE
        if effort is not None and (effort is Effort.NONE) != (implied is Effort.NONE):
            raise InvalidInputError(
                f"{where}: enable_thinking = {enable} contradicts reasoning_effort = "
                f"{effort.value!r}"
            )
        effort = effort or implied
    if "model" not in fields:
        raise InvalidInputError(f"{where}: a source needs a MODEL")
    if effort is None and isinstance(fields["model"], str):
        effort = thinking_default_for(default, fields["model"])
        if effort is not default:
            assert effort is not None
            clamped.append(f"{where} ({fields['model']}: {effort.value})")
    fields["reasoning_effort"] = effort
    if mismatch is not None and fields.get("prefix_mismatch") is None:
        fields["prefix_mismatch"] = mismatch
    try:
        return Source(provider, **fields)
    except ValueError as exc:
        raise InvalidInputError(f"{where}: {exc}") from None


def _check_scope(scope: object) -> None:
    if not isinstance(scope, str) or not scope.strip():
        raise InvalidInputError(
            "scope must be the prefix of the variables, a non-empty str (CHAT for "
            f"CHAT__OPENAI__0__MODEL); got {type(scope).__name__} {scope!r}"
        )


def sources_from_env(scope: str, environ: Mapping[str, str] | None = None) -> list[Source]:
    """Read sources from variables named ``{SCOPE}__{PROVIDER}__{N}__{FIELD}``.

    For example ``CHAT__OPENAI__0__MODEL=gpt-5.5`` and
    ``CHAT__ANTHROPIC__1__REASONING_EFFORT=high``. Sources are ordered by ``N`` (then by
    provider). ``{SCOPE}__THINKING__ENABLED`` / ``{SCOPE}__THINKING__EFFORT`` give the
    default for sources without their own effort, ``{SCOPE}__THINKING__PREFIX_MISMATCH``
    for those without their own ``prefix_mismatch``. Keys come from the provider's standard
    variables (``OPENAI_API_KEY`` …) when no ``API_KEY`` field is set.

    Raises:
        ValueError: for a ``scope`` that is not a non-empty ``str``, an
            unknown provider or field, a malformed value, a source without a model, no
            source at all, or a contradiction (thinking disabled but an effort
            given for the same source).
    """
    _check_scope(scope)
    env = os.environ if environ is None else environ
    prefix = scope.upper()
    thinking: dict[str, Any] = {}
    grouped: dict[tuple[int, str], dict[str, Any]] = {}
    for key, value in env.items():
        if not key.startswith(prefix + "__"):
            continue
        if key[len(prefix) + 2 :].lower() in _OPTIONS:
            continue
        if key.startswith(f"{prefix}__THINKING__") and key not in (
            f"{prefix}__THINKING__ENABLED",
            f"{prefix}__THINKING__EFFORT",
            f"{prefix}__THINKING__PREFIX_MISMATCH",
        ):
            raise InvalidInputError(
                f"{key}: unknown [thinking] field; known: ENABLED, EFFORT, PREFIX_MISMATCH"
            )
        if key == f"{prefix}__THINKING__ENABLED":
            thinking["enabled"] = _convert("enable_thinking", value, key)
            continue
        if key == f"{prefix}__THINKING__EFFORT":
            thinking["effort"] = value
            continue
        if key == f"{prefix}__THINKING__PREFIX_MISMATCH":
            thinking["prefix_mismatch"] = value
            continue
        match = _ENV_KEY.match(key)
        if not match or match["scope"] != prefix:
            raise InvalidInputError(
                f"{key}: expected {prefix}__<PROVIDER>__<N>__<FIELD> with FIELD one of "
                + ", ".join(_FIELDS)
            )
        field_name = _FIELDS.get(match["field"])
        if field_name is None:
            raise InvalidInputError(
                f"{key}: unknown field {match['field']!r}; known: {', '.join(_FIELDS)}"
            )
        provider = _provider_from_env(match["provider"])
        group = grouped.setdefault((int(match["n"]), provider), {})
        group[field_name] = _convert(field_name, value, key)
    if not grouped:
        raise InvalidInputError(f"no sources found: set {prefix}__<PROVIDER>__0__MODEL")
    default = _thinking_default(thinking, f"{prefix}__THINKING")
    mismatch = _thinking_mismatch(thinking, f"{prefix}__THINKING")
    clamped: list[str] = []
    sources = [
        _build(
            dict(fields),
            provider,
            f"{prefix}__{provider.upper()}__{n}",
            default,
            clamped,
            mismatch,
        )
        for (n, provider), fields in sorted(grouped.items())
    ]
    _warn_clamped(f"{prefix}__THINKING", clamped)
    return sources


def _warn_clamped(where: str, clamped: list[str]) -> None:
    if clamped:
        _log.warning(
            "%s says thinking off, but these models cannot switch reasoning off and use "
            "their default tier instead: %s (set reasoning_effort on a source to choose)",
            where,
            ", ".join(clamped),
        )


def toml_table(value: Any, name: str, where: str) -> Mapping[str, Any] | None:
    """The TOML table ``[name]`` read from a file, or ``None`` when it is absent.

    Raises:
        ValueError: ``value`` is not a table (``name = 5``, ``name = [1]``); the message
            names ``where`` and the shape accepted.
    """
    if value is None or isinstance(value, Mapping):
        return value
    raise InvalidInputError(
        f"{where}: {name} must be a [{name}] table of keys and values; got {value!r}"
    )


def toml_tables(value: Any, name: str, where: str) -> list[Mapping[str, Any]]:
    """The TOML array of tables ``[[name]]`` read from a file; ``[]`` when it is absent.

    Raises:
        ValueError: ``value`` is not an array of tables (``name = 5``, ``name = [1, 2]``,
            a single ``[name]`` table); the message names ``where``, the entry and the shape
            accepted.
    """
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidInputError(
            f"{where}: {name} must be [[{name}]] tables (an array of tables); got {value!r}"
        )
    for i, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise InvalidInputError(
                f"{where}: {name} #{i} must be a [[{name}]] table of keys and values; got {item!r}"
            )
    return value


def read_toml(path: str | Path) -> dict[str, Any]:
    """The parsed TOML file at ``path``.

    Raises:
        ValueError: ``path`` is not a non-empty ``str`` or an ``os.PathLike`` (an int would
            be taken by ``open`` as a file descriptor), is a directory, or the file is not
            valid TOML (not UTF-8 text,
            or a syntax error); the message names the file, and the line and column or the
            offset of the first byte that is not UTF-8.
        ConfigFileNotFoundError: no file at ``path`` (named in the message); a
            ``ValueError`` and a ``FileNotFoundError`` as well.
        OSError: another reason the file cannot be read (no permission).
    """
    import tomllib  # with a configuration file, not with import polythink

    if not isinstance(path, str | os.PathLike) or (isinstance(path, str) and not path.strip()):
        # open(3) would read, then close, file descriptor 3 (0 is standard input).
        raise InvalidInputError(
            f"a TOML configuration is read from a path: a non-empty str or an os.PathLike "
            f"such as pathlib.Path; got {type(path).__name__} {path!r}"
        )
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except IsADirectoryError:
        raise InvalidInputError(f"{path}: is a directory, not a TOML file") from None
    except FileNotFoundError:
        raise ConfigFileNotFoundError(
            f"{path}: no such file (a TOML configuration file was expected there)", str(path)
        ) from None
    try:
        text = raw.decode()
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"{path}: not valid TOML: TOML is UTF-8 text, and byte {raw[exc.start]:#04x} at "
            f"offset {exc.start} is not UTF-8"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInputError(f"{path}: not valid TOML: {exc}") from None


_SERVE = ("serve", "route", "tenant")
"""Tables ``polythink serve`` reads from the same file (:mod:`polythink.serve.config`); a
client built from it leaves them alone."""


def sources_from_toml(path: str | Path) -> list[Source]:
    """Read sources from a TOML file.

    Shape::

        [thinking]            # optional defaults for sources without their own
        enabled = true
        effort = "medium"
        prefix_mismatch = "drop_block"   # Source.prefix_mismatch

        [[source]]
        provider = "openai"
        model = "gpt-5.5"
        reasoning_effort = "high"
        service_tier = "flex"          # optional: flex | standard | priority | auto
        capacity_fallback = "standard" # optional: the tier to resend at on "no capacity"

    Raises:
        ValueError: for a path that is a directory, a file that is not UTF-8 or not valid
            TOML (naming it), an unknown key or provider, a malformed value, no
            ``[[source]]``, a table or array of tables given another type (``thinking = 5``,
            ``source = [1, 2]``), a ``path`` that is not a ``str`` or ``os.PathLike``, or a
            contradiction between ``enabled`` and ``effort``.
        ConfigFileNotFoundError: no file at ``path`` (named in the message); a
            ``FileNotFoundError`` and a ``ValueError`` as well.
    """
    data = read_toml(path)
    unknown_tables = sorted(set(data) - {"thinking", "source", "budget", *_OPTIONS, *_SERVE})
    if unknown_tables:
        raise InvalidInputError(
            f"{path}: unknown top-level keys {unknown_tables}; known: [thinking], [[source]], "
            "[[budget]], " + ", ".join(_OPTIONS) + ", and polythink serve's [serve], [[route]], "
            "[[tenant]]"
        )
    thinking = toml_table(data.get("thinking"), "thinking", str(path))
    default = _thinking_default(thinking, f"{path} [thinking]")
    mismatch = _thinking_mismatch(thinking, f"{path} [thinking]")
    rows = toml_tables(data.get("source"), "source", str(path))
    if not rows:
        raise InvalidInputError(f"{path}: no [[source]] tables")
    sources = []
    clamped: list[str] = []
    allowed = set(_FIELDS.values()) | {"provider", "headers", "extra_body"}
    for i, row in enumerate(rows):
        where = f"{path} [[source]] #{i}"
        unknown = set(row) - allowed
        if unknown:
            raise InvalidInputError(
                f"{where}: unknown keys {sorted(unknown)}; known: {sorted(allowed)}"
                + (_MIDDLEWARE_IN_CODE if "middleware" in unknown else "")
            )
        fields = {k: v for k, v in row.items() if k != "provider"}
        if "provider" not in row:
            raise InvalidInputError(f"{where}: a source needs a provider")
        sources.append(_build(fields, row["provider"], where, default, clamped, mismatch))
    _warn_clamped(f"{path} [thinking]", clamped)
    return sources


def options_from_env(scope: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Read the client options ``{SCOPE}__LIMITS`` and ``{SCOPE}__CACHE``.

    For example ``CHAT__LIMITS=redis://redis:6379/0`` shares the sources' limits through
    that server and ``CHAT__CACHE=redis://redis:6379/0`` (or a directory) the cache.
    Returns the ``Client`` keywords that are set, as strings.
    """
    _check_scope(scope)
    env = os.environ if environ is None else environ
    prefix = scope.upper()
    found = {}
    for name in _OPTIONS:
        value = env.get(f"{prefix}__{name.upper()}", "").strip()
        if value:
            found[name] = value
    return found


def options_from_toml(path: str | Path) -> dict[str, Any]:
    """Read the client options of a sources TOML file: ``limits``, ``cache`` and budgets.

    Shape: ``limits = "redis://redis:6379/0"`` and ``cache = "redis://redis:6379/0"`` (or a
    directory) before the first table, and one ``[[budget]]`` table per
    :class:`~polythink.Budget` (its arguments by name)::

        [[budget]]
        usd = 5.0
        per = "day"
        tag = "*"
        step_down_at = 0.8
        flex_at = 0.9

    Raises:
        ValueError: for a ``limits`` or ``cache`` that is not a non-empty string, a budget
            table with an unknown key, or a budget :class:`~polythink.Budget` refuses.
    """
    from polythink.budgets import Budget

    data = read_toml(path)
    found: dict[str, Any] = {}
    for name in _OPTIONS:
        if name in data:
            value = data[name]
            if not isinstance(value, str) or not value.strip():
                raise InvalidInputError(f"{path}: {name} must be a non-empty string; got {value!r}")
            found[name] = value.strip()
    budgets = []
    for i, table in enumerate(toml_tables(data.get("budget"), "budget", str(path))):
        unknown = sorted(set(table) - set(Budget.__dataclass_fields__))
        if unknown:
            raise InvalidInputError(
                f"{path} [[budget]] #{i}: unknown keys {unknown}; known: "
                + ", ".join(Budget.__dataclass_fields__)
            )
        try:
            budgets.append(Budget(**table))
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"{path} [[budget]] #{i}: {exc}") from None
    if budgets:
        found["budgets"] = budgets
    return found
