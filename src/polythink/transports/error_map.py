"""The error boundary: HTTP statuses, in-band error bodies and transport failures, mapped once.

Every failure a transport sees becomes one class of :mod:`polythink.errors` here, with the
provider's own type, message, request id and retry hints, and the body redacted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import httpx

from polythink.errors import (
    AuthError,
    ContentFilterError,
    ContextWindowExceededError,
    ModelNotFoundError,
    PolythinkError,
    RateLimitedError,
    RequestRejectedError,
    RequestTimeoutError,
    ThinkingBindingError,
    ThinkingUnsupportedError,
    TransientError,
    holds_secret,
    recast,
    redact,
)
from polythink.transports.headers import (
    SECONDS,
    header_request_id,
    header_should_retry,
    parse_rate_limit,
    parse_retry_after,
)
from polythink.wire_json import loads_json

if TYPE_CHECKING:
    from polythink.config import Timeout

__all__ = [
    "RESPONSES_REJECT_CODES",
    "TRANSPORT_ERRORS",
    "aws_error_type",
    "content_filter_result",
    "context_window_error",
    "deadline_error",
    "error_from_body",
    "error_from_status",
    "error_from_transport",
    "in_band_class",
    "names_missing_model",
    "sealed",
    "thinking_binding_error",
    "trusted_type",
]


def _error_fields(body: Any) -> tuple[str | None, str | None, str | None, frozenset[str]]:
    """Return (error_type, message, param, kinds) from the common provider error shapes.

    OpenAI ``{"error": {"type", "code", "message", "param"}}``; Anthropic ``{"type": "error",
    "error": {"type", "message"}}``; Gemini ``{"error": {"code", "status", "message"}}``.
    ``error_type`` prefers a string ``code`` over ``type`` over ``status``; ``kinds`` holds
    all of them (and a numeric ``code``) lowercased, for classification.
    """
    if isinstance(body, list) and body:
        body = body[0]
    if not isinstance(body, Mapping):
        return None, None, None, frozenset()
    err = body.get("error", body)
    if not isinstance(err, Mapping):
        return None, str(err), None, frozenset()
    code = err.get("code")
    kind = code if isinstance(code, str) and code else err.get("type") or err.get("status")
    message = err.get("message")
    param = err.get("param")
    kinds = frozenset(
        str(value).lower()
        for value in (code, err.get("type"), err.get("status"))
        if isinstance(value, str | int) and not isinstance(value, bool) and value != ""
    )
    return (
        str(kind) if kind else None,
        str(message) if message is not None else None,
        str(param) if param else None,
        kinds,
    )


_IDENTIFIER = re.compile(r"[A-Za-z0-9_.:\-]{1,64}")


def trusted_type(value: str | None, secrets: Iterable[str | None] = ()) -> str | None:
    """``value`` when it is plausible as a provider's error type or code, else ``None``.

    Plausible: 1 to 64 letters, digits, ``_``, ``.``, ``-`` or ``:`` (``rate_limit_error``,
    ``RESOURCE_EXHAUSTED``, ``1261``), holding no secret (``redact`` leaves it as it is). A
    server that echoes the request into its error's ``code``, ``type`` or ``status`` gives
    anything else; that text stays in the error's (redacted) body only.
    """
    if value is None or not _IDENTIFIER.fullmatch(value) or redact(value, secrets) != value:
        return None
    return value


def _plausible(kinds: frozenset[str]) -> frozenset[str]:
    return frozenset(kind for kind in kinds if _IDENTIFIER.fullmatch(kind))


_E = TypeVar("_E", bound=PolythinkError)


def sealed(error: _E, secrets: Iterable[str | None] = ()) -> _E:
    """``error`` with every string it carries redacted (:func:`~polythink.errors.redact`):
    its message, ``args``, notes, and every string attribute (``body``, ``error_type``,
    ``request_id``, ``model`` ...). Errors built from what a provider answered pass through
    here, so a key the server echoes into any field, a header included, is never kept."""
    held = tuple(secrets)
    for name, value in vars(error).items():
        if isinstance(value, str):
            setattr(error, name, redact(value, held))
    error.args = tuple(redact(arg, held) if isinstance(arg, str) else arg for arg in error.args)
    notes = getattr(error, "__notes__", None)
    if isinstance(notes, list):
        error.__notes__ = [redact(note, held) if isinstance(note, str) else note for note in notes]
    return error


def _retry_info(body: Any) -> float | None:
    """Seconds from a Google ``google.rpc.RetryInfo`` error detail (``"retryDelay": "37s"``).

    Gemini puts its wait there rather than in a header (error model: AIP-193,
    https://google.aip.dev/193; ``RetryInfo.retry_delay`` is a ``Duration``, JSON ``"<n>s"``).
    """
    err = body.get("error") if isinstance(body, Mapping) else None
    details = err.get("details") if isinstance(err, Mapping) else None
    if not isinstance(details, list):
        return None
    for detail in details:
        if (
            isinstance(detail, Mapping)
            and str(detail.get("@type", "")).endswith("google.rpc.RetryInfo")
            and isinstance(detail.get("retryDelay"), str)
        ):
            delay = detail["retryDelay"].strip()
            if delay.endswith("s") and SECONDS.fullmatch(delay[:-1]):
                return float(delay[:-1])
    return None


_REASONING_PARAMS = frozenset({"reasoning_effort", "reasoning.effort", "reasoning", "thinking"})

_MISSING_MODEL_CODES = frozenset({"model_not_found", "model_decommissioned"})
"""Error codes that say the model is not served: OpenAI's 404 ``model_not_found`` ("The model
`x` does not exist or you do not have access to it.", as relayed in siteboon/claudecodeui#951,
2026-07) and Groq's 400 ``model_decommissioned`` ("The model `x` has been decommissioned and is
no longer supported.", valentinfrlch/ha-llmvision#324, 2025-04)."""

_MISSING_MODEL_TEXT = re.compile(
    # Anthropic 404 not_found_error: "model: claude-3-7-sonnet-latest" (continuedev/continue#9476,
    # 2026-01) and "model 'claude-haiku-4-5-20251001' not found" (anthropics/claude-code#41120,
    # 2026-03); Gemini 404 NOT_FOUND: "models/gemini-1.0-pro is not found for API version
    # v1beta, or is not supported for generateContent" (wwardaww/gnome-gemini-ai#21, 2025-03);
    # OpenAI-shaped 404s: "The model `gpt-x` does not exist".
    r"^model: \S+$|\bmodel '[^']+' not found|\bmodels/\S+ is not found"
    r"|\bthe model `?[^`\s]+`? does not exist",
    re.IGNORECASE,
)
_NOT_FOUND_KINDS = frozenset({"not_found_error", "not_found", "404"})


def names_missing_model(status: int | None, kinds: frozenset[str], message: str | None) -> bool:
    """Whether an error says the requested model is not served (does not exist, retired,
    decommissioned), as opposed to any other 404 (a wrong URL: "404 page not found").

    ``kinds`` holds the error's code, type and status, lower-cased; see
    :data:`_MISSING_MODEL_CODES` and :data:`_MISSING_MODEL_TEXT` for the shapes and sources.
    """
    if kinds & _MISSING_MODEL_CODES:
        return True
    not_found = status == 404 or bool(kinds & _NOT_FOUND_KINDS)
    return not_found and message is not None and bool(_MISSING_MODEL_TEXT.search(message.strip()))


_QUOTA_TYPES = frozenset(
    {
        "insufficient_quota",
        "credit_balance_exhausted",
        "organization_spend_limit_exceeded",
        "project_spend_limit_exceeded",
        "organization_usage_limit_exceeded",
    }
)
"""OpenAI 429s that waiting cannot lift (quota or spend limit; learn.microsoft.com Dev Proxy
"OpenAI insufficient_quota" page, 2026, citing OpenAI's error-codes guide)."""


def error_from_status(
    status: int,
    headers: Mapping[str, str],
    content: bytes,
    *,
    provider: str,
    source_index: int,
    secrets: Iterable[str | None] = (),
    now: Callable[[], float] | None = None,
) -> PolythinkError:
    """Map an HTTP error response to polythink's taxonomy.

    429 -> :class:`RateLimitedError`; 401, 402, 403 -> :class:`AuthError`; 408, 409, 5xx,
    529 -> :class:`TransientError`; a 4xx that says the model is not served ->
    :class:`ModelNotFoundError` (:func:`names_missing_model`); other 4xx ->
    :class:`RequestRejectedError`, or :class:`ThinkingUnsupportedError` when the provider named
    a reasoning parameter as the unsupported one (OpenAI ``param: reasoning_effort``, ``code:
    unsupported_value``).

    ``retry_after`` comes from ``retry-after-ms`` / ``retry-after`` (see
    :func:`parse_retry_after`; ``now`` is its wall clock), else from a Gemini
    ``RetryInfo`` detail. ``should_retry`` is the ``x-should-retry`` header, else ``False``
    for an exhausted quota. A body that is not JSON is kept (redacted) as the message. The
    error's ``rate_limit`` holds the parsed rate-limit headers (:func:`parse_rate_limit`).

    The provider's ``code`` / ``type`` / ``status`` is the error's ``error_type`` only when
    :func:`trusted_type` finds it plausible; one that is not (the request's headers echoed
    into it) gives ``"http_<status>"`` and stays in the body. Every string of the result is
    redacted (:func:`sealed`), the request id header included.
    """
    secrets = tuple(secrets)
    text = redact(content.decode("utf-8", errors="replace"), secrets)
    try:
        parsed = loads_json(content) if content else None
    except ValueError:
        parsed = None
    given, message, param, kinds = _error_fields(parsed)
    aws_type = aws_error_type(headers, parsed)
    if aws_type is not None:
        given = given or aws_type
        kinds = kinds | {aws_type.lower()}
    kinds = _plausible(kinds)
    error_type = trusted_type(given, secrets)
    if given is not None and error_type is None:
        error_type = f"http_{status}"
    summary = message or text[:200] or httpx.codes.get_reason_phrase(status)
    if 300 <= status < 400:
        # Redirects are not followed: a provider key must never reach another host (httpx
        # strips only Authorization on a cross-origin redirect, not x-api-key or
        # x-goog-api-key), and LLM endpoints do not redirect in normal operation.
        error_type = "redirect"
        summary = (
            f"redirected to {headers.get('location', 'an unnamed location')}; polythink does "
            "not follow redirects, so set the source's base_url to the final endpoint"
        )
    should_retry = header_should_retry(headers)
    retry_after = parse_retry_after(headers, now)
    if retry_after is None:
        retry_after = _retry_info(parsed)
    cls: type[PolythinkError]
    if status == 429:
        cls = RateLimitedError
        if should_retry is None and kinds & _QUOTA_TYPES:
            should_retry = False
    elif kinds & _QUOTA_REJECTS:
        cls = RateLimitedError
        if should_retry is None:
            should_retry = False
    elif status in (401, 402, 403):
        cls = AuthError
    elif status in (408, 409) or status >= 500:
        cls = TransientError
    elif names_missing_model(status, kinds, message):
        cls = ModelNotFoundError
    elif param in _REASONING_PARAMS:
        cls = ThinkingUnsupportedError
    else:
        cls = RequestRejectedError
    extra: dict[str, Any] = {}
    if "content_filter" in kinds and cls is RequestRejectedError:
        cls = ContentFilterError
        extra["content_filter_result"] = content_filter_result(parsed)
    error = cls(
        f"{provider} answered HTTP {status}: {redact(summary, secrets)}",
        provider=provider,
        source_index=source_index,
        status_code=status,
        error_type=error_type,
        request_id=header_request_id(headers),
        retry_after=retry_after,
        should_retry=should_retry,
        body=text,
        **extra,
    )
    error.rate_limit = parse_rate_limit(headers)
    return sealed(thinking_binding_error(context_window_error(error)), secrets)


def content_filter_result(body: Any) -> dict[str, Any] | None:
    """The per-category verdict of an Azure content-filter refusal: ``error.innererror``
    (``inner_error`` in newer bodies) ``.content_filter_result`` (CLOUDS.md §3.1, AZ-CF), or
    ``None``."""
    error = body.get("error") if isinstance(body, Mapping) else None
    if not isinstance(error, Mapping):
        return None
    for key in ("innererror", "inner_error"):
        inner = error.get(key)
        if isinstance(inner, Mapping):
            found = inner.get("content_filter_result") or inner.get("content_filter_results")
            if isinstance(found, Mapping):
                return dict(found)
    return None


_QUOTA_REJECTS = frozenset({"servicequotaexceededexception"})
"""Quota refusals sent with a status other than 429: Bedrock's
``ServiceQuotaExceededException`` (HTTP 400, a sender fault: "Your request exceeds the service
quota for your account"; bedrock-runtime service model, botocore 1.44.8, CLOUDS.md §1.9).
Waiting does not lift it: a :class:`RateLimitedError` with ``should_retry=False``."""


def aws_error_type(headers: Mapping[str, str], body: Any) -> str | None:
    """The error type of an AWS rest-json answer (Bedrock), or ``None`` for another shape.

    From the ``x-amzn-ErrorType`` header (``ValidationException:http://…``: the part before
    ``:``), else the body's ``__type`` (``com.amazon.coral…#ThrottlingException``: the part
    after ``#``), as botocore's rest-json parser reads them (CLOUDS.md §1.9, BOTO-CODE).
    """
    raw = headers.get("x-amzn-errortype")
    if raw is None and isinstance(body, Mapping) and isinstance(body.get("__type"), str):
        raw = body["__type"].rsplit("#", 1)[-1]
    if not raw:
        return None
    found = raw.split(":", 1)[0].rsplit("#", 1)[-1].strip()
    return found or None


_RATE_TYPES = frozenset(
    {
        "rate_limit_error",
        "rate_limit_exceeded",
        "resource_exhausted",
        "too_many_requests",
        "429",
        # Bedrock's stream exceptions (ConverseStream, InvokeModelWithResponseStream).
        "throttlingexception",
        "modelnotreadyexception",
    }
)
_AUTH_TYPES = frozenset(
    {
        "authentication_error",
        "permission_error",
        "billing_error",
        "invalid_api_key",
        "unauthenticated",
        "permission_denied",
        "accessdeniedexception",
        "401",
        "402",
        "403",
    }
)
_REJECT_TYPES = frozenset(
    {
        "invalid_request_error",
        "invalid_argument",
        "validationexception",
        "not_found_error",
        "request_too_large",
        "400",
        "404",
        "413",
        "422",
    }
)


def error_from_body(
    error: Any,
    *,
    provider: str,
    source_index: int,
    status_code: int | None = None,
    request_id: str | None = None,
    secrets: Iterable[str | None] = (),
) -> PolythinkError:
    """Map an in-band error (an SSE ``error`` event or an ``{"error": …}`` chunk).

    The class follows the provider's error type or code (any of ``code``, ``type``,
    ``status``): rate-limit and quota types -> :class:`RateLimitedError` (quota ones with
    ``should_retry=False``); authentication, permission, billing -> :class:`AuthError`;
    invalid request -> :class:`RequestRejectedError`; anything else (``overloaded_error``,
    ``api_error``, ``server_error``, ``timeout_error`` …) -> :class:`TransientError`, so an
    in-band overload is retried like a 529 (Anthropic error types: the Messages OpenAPI
    ``ErrorResponse`` union, ``../shared/wire/specs``). ``status_code`` stays the stream's
    own (usually 200). A Gemini ``RetryInfo`` detail gives ``retry_after``. A type
    :func:`trusted_type` does not find plausible is not the error's ``error_type`` and does
    not classify it: as for an HTTP error, the status gives ``http_<status>`` (``http_200``
    inside a 200 stream; ``None`` when no status is known) and the body keeps the original.
    Every string of the result is redacted (:func:`sealed`).
    """
    secrets = tuple(secrets)
    given, message, _, kinds = _error_fields(error)
    kinds = _plausible(kinds)
    error_type = trusted_type(given, secrets)
    if given is not None and error_type is None and status_code is not None:
        error_type = f"http_{status_code}"
    cls: type[PolythinkError]
    should_retry = None
    if kinds & (_QUOTA_TYPES | _QUOTA_REJECTS):
        cls = RateLimitedError
        should_retry = False
    elif kinds & _RATE_TYPES:
        cls = RateLimitedError
    elif kinds & _AUTH_TYPES:
        cls = AuthError
    elif names_missing_model(status_code, kinds, message):
        cls = ModelNotFoundError
    elif kinds & _REJECT_TYPES:
        cls = RequestRejectedError
    else:
        cls = in_band_class(kinds)
    if given is None and isinstance(error, Mapping):
        inner = error.get("error", error)
        if isinstance(inner, Mapping) and isinstance(inner.get("code"), int):
            error_type = str(inner["code"])
    body = redact(json.dumps(error, ensure_ascii=False, default=str), secrets)
    label = message or error_type or "unknown"
    mapped = cls(
        f"{provider} sent an in-stream error: {redact(label, secrets)}",
        provider=provider,
        source_index=source_index,
        status_code=status_code,
        error_type=error_type,
        request_id=request_id,
        retry_after=_retry_info(error),
        should_retry=should_retry,
        body=body,
    )
    return sealed(context_window_error(mapped), secrets)


RESPONSES_REJECT_CODES = frozenset(
    {
        "invalid_prompt",
        "data_residency_mismatch",
        "bio_policy",
        "invalid_image",
        "invalid_image_format",
        "invalid_base64_image",
        "invalid_image_url",
        "image_too_large",
        "image_too_small",
        "image_parse_error",
        "image_content_policy_violation",
        "invalid_image_mode",
        "image_file_too_large",
        "unsupported_image_media_type",
        "empty_image_file",
        "failed_to_download_image",
        "image_file_not_found",
    }
)
"""The Responses ``ResponseErrorCode`` values that say the request itself was refused (openai-
openapi ``ResponseErrorCode``, ``../shared/wire/specs``); the other three are
``server_error`` and ``vector_store_timeout`` (transient) and ``rate_limit_exceeded``."""

_IN_BAND_REJECTS = frozenset(
    {
        "data_inspection_failed",
        "failed_precondition",
        "not_found",
        "out_of_range",
        "context_length_exceeded",
        *RESPONSES_REJECT_CODES,
    }
)
"""In-band error types a retry cannot fix, beyond the common invalid-request ones:
DashScope's content moderation ``data_inspection_failed`` (Model Studio error codes,
https://www.alibabacloud.com/help/en/model-studio/error-code, 2025), Google's
``FAILED_PRECONDITION`` / ``NOT_FOUND`` / ``OUT_OF_RANGE`` (https://google.aip.dev/193),
OpenAI's ``context_length_exceeded``, and :data:`RESPONSES_REJECT_CODES`."""


def in_band_class(kinds: frozenset[str]) -> type[PolythinkError]:
    """The class of an in-band error whose type is none of the rate, auth or common reject
    types: :class:`RequestRejectedError` for :data:`_IN_BAND_REJECTS`, else
    :class:`TransientError` (an overload, a server error, a type polythink does not know)."""
    if kinds & _IN_BAND_REJECTS:
        return RequestRejectedError
    return TransientError


_N = r"([0-9][0-9,_]*)"
_CONTEXT_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE | re.DOTALL), order)
    for pattern, order in (
        # Anthropic: "prompt is too long: 208310 tokens > 200000 maximum".
        (rf"prompt is too long: {_N} tokens > {_N} maximum", "rl"),
        # Anthropic: "input length and `max_tokens` exceed context limit: 197254 + 8192 >
        # 200000, decrease input length or `max_tokens` and try again".
        (rf"exceed context limit: {_N} \+ {_N} > {_N}", "r+l"),
        # OpenAI, DeepSeek, Groq, OpenRouter, vLLM: "This model's maximum context length is
        # 128000 tokens. However, your messages resulted in 130532 tokens" / "you requested
        # 70000 tokens (…)" / "you requested about 250000 tokens".
        (
            rf"maximum context length is {_N} tokens.*?"
            rf"(?:resulted in|requested(?: about)?|request has) {_N}",
            "lr",
        ),
        # OpenAI: "Input tokens exceed the configured limit of 272000 tokens. Your messages
        # resulted in 300000 tokens."
        (rf"exceed the configured limit of {_N} tokens.*?resulted in {_N}", "lr"),
        # Gemini: "The input token count (1234567) exceeds the maximum number of tokens
        # allowed (1048576)."
        (
            rf"input token count \(?{_N}\)? exceeds the maximum number of tokens allowed"
            rf" \(?{_N}",
            "rl",
        ),
        # Mistral: "Prompt contains 40000 tokens and 0 draft tokens, too large for model with
        # 32768 maximum context length".
        (rf"prompt contains {_N} tokens.*?too large for model with {_N} maximum context", "rl"),
        # xAI: "This model's maximum prompt length is 131072 but the request contains 143784
        # tokens."
        (rf"maximum prompt length is {_N} but the request contains {_N}", "lr"),
        # Moonshot: "Invalid request: Your request exceeded model token limit: 131072".
        (rf"exceeded model token limit: {_N}", "l"),
        # DashScope: "Range of input length should be [1, 129024]".
        (rf"range of input length should be \[1, ?{_N}\]", "l"),
    )
)
_CONTEXT_CODES = frozenset({"context_length_exceeded", "model_context_window_exceeded", "1261"})
"""Codes that name the context window without numbers: OpenAI's and Zhipu GLM's 1261
"Prompt exceeds max length" (https://docs.bigmodel.cn/cn/faq/api-code, 2025)."""
_CONTEXT_PHRASES = ("context window", "context length", "prompt exceeds max length")


def _count(text: str) -> int:
    return int(text.replace(",", "").replace("_", ""))


def context_window_error(error: PolythinkError) -> PolythinkError:
    """Return ``error`` as a :class:`ContextWindowExceededError` when it says the prompt does
    not fit the model's context window; otherwise ``error`` itself.

    Only a :class:`RequestRejectedError` (HTTP 400, 413, 422 or an in-band reject) is
    considered, never a reasoning rejection. ``limit`` and ``requested`` (tokens) are read
    from the provider's wording where it states them (the patterns above, one per
    provider's documented or observed message); a matching code (``context_length_exceeded``,
    GLM ``1261``) or a phrase naming the context window gives the error without numbers.
    """
    if type(error) is not RequestRejectedError:
        return error
    text = " ".join(part for part in (error.message, error.body or "") if part)
    limit: int | None = None
    requested: int | None = None
    found = False
    for pattern, order in _CONTEXT_PATTERNS:
        match = pattern.search(text)
        if match is None:
            continue
        numbers = [_count(group) for group in match.groups() if group]
        if order == "rl":
            requested, limit = numbers[0], numbers[1]
        elif order == "lr":
            limit, requested = numbers[0], numbers[1]
        elif order == "r+l":
            requested, limit = numbers[0] + numbers[1], numbers[2]
        else:
            limit = numbers[0]
        found = True
        break
    if not found:
        lowered = text.lower()
        found = (error.error_type or "").lower() in _CONTEXT_CODES or any(
            phrase in lowered for phrase in _CONTEXT_PHRASES
        )
    if not found:
        return error
    return recast(error, ContextWindowExceededError, limit=limit, requested=requested)


_BOUND = re.compile(
    r"(?:(messages\.\d+\.content\.\d+): )?Invalid `signature` in `(?:redacted_)?thinking` "
    r"block\. The block is bound to a different conversation\.(.*)",
    re.DOTALL,
)
"""Anthropic's 400 for a thinking block that failed the prefix check (CONTINUITY.md §1.4:
"messages.1.content.0: Invalid `signature` in `thinking` block. The block is bound to a
different conversation. Remove the block, or set
`thinking.block_binding.prefix_mismatch_behavior` to "drop_block"." and, without the beta,
"That setting requires the `thinking-binding-controls-2026-08-01` value in the
`anthropic-beta` header.", often then one sentence naming what changed; PT-SEP, FIX)."""
_KNOWN_SENTENCES = (
    re.compile(
        r"Remove the block, or set `thinking\.block_binding\.prefix_mismatch_behavior` "
        r"to \\?\"drop_block\\?\"\.?"
    ),
    re.compile(
        r"That setting requires the `thinking-binding-controls-2026-08-01` value in the "
        r"`anthropic-beta` header\.?"
    ),
)


def thinking_binding_error(error: PolythinkError) -> PolythinkError:
    """Return ``error`` as a :class:`ThinkingBindingError` when it is Anthropic's 400 for a
    thinking block bound to a different conversation (:data:`_BOUND`); otherwise ``error``.

    The message says which block failed, what changed (the API's own sentence after the two
    it always sends, when there is one) and how to fix it.
    """
    if type(error) is not RequestRejectedError:
        return error
    found = _BOUND.search(error.message)
    if found is None:
        return error
    rest = found.group(2)
    beta_missing = _KNOWN_SENTENCES[1].search(rest) is not None
    for pattern in _KNOWN_SENTENCES:
        rest = pattern.sub("", rest)
    changed = " ".join(rest.split()) or None
    path = found.group(1)
    where = f"the thinking block at {path}" if path else "a thinking block"
    what = (
        f"the API says: {changed.rstrip('.')}"
        if changed
        else "the system prompt, the tools or an earlier message changed since the model "
        "wrote it, or a thinking block before it was left out"
    )
    mapped = recast(
        error,
        ThinkingBindingError,
        f"{error.provider or 'anthropic'} answered HTTP {error.status_code}: {where} is bound "
        f"to a different conversation ({what}). Send the conversation as polythink returned "
        "it: append response.message and the new turns, keep the system prompt and tools, and "
        "put what changes every call in system_suffix; or allow the API to drop such blocks "
        "with prefix_mismatch='drop_block' (per call, on the Source or the Client, or in "
        "[thinking] of a TOML file); or strip the thinking blocks once with "
        "polythink.conversation.strip_reasoning(messages)",
        path=path,
        changed=changed,
        beta_missing=beta_missing,
    )
    # The same body fails again: never worth a retry.
    mapped.should_retry = False
    return mapped


TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    httpx.HTTPError,
    OSError,
    anyio.EndOfStream,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
)
"""What a send or a body read may raise below polythink: httpx's tree, and the socket, SSL
and anyio stream errors an alternative HTTP transport under httpx may let through
(``ssl.SSLError`` and ``TimeoutError`` are ``OSError`` s)."""

_TIMEOUT_KINDS: tuple[tuple[type[httpx.TimeoutException], str, str], ...] = (
    (httpx.ConnectTimeout, "connect_timeout", "no connection within {connect}"),
    (httpx.WriteTimeout, "write_timeout", "the request was not sent within {connect}"),
    (httpx.PoolTimeout, "pool_timeout", "no free pooled connection within {connect}"),
)
"""The httpx timeouts ``Timeout.connect`` bounds (it is also httpx's write and pool timeout)."""
_UNSENDABLE: tuple[tuple[type[httpx.HTTPError], str], ...] = (
    (httpx.UnsupportedProtocol, "unsupported_protocol"),
    (httpx.LocalProtocolError, "local_protocol_error"),
    (httpx.TooManyRedirects, "too_many_redirects"),
)


def error_from_transport(
    exc: BaseException,
    *,
    provider: str,
    source_index: int,
    stage: str = "response",
    secrets: Iterable[str | None] = (),
    timeouts: Timeout | None = None,
    streamed: bool = False,
    budget: float | None = None,
) -> PolythinkError:
    """Map a failure below HTTP to the taxonomy; raise the result outside any ``except``.

    ``stage`` is ``"response"`` while waiting for the status line and headers, ``"body"``
    while reading a body: an httpx read timeout is then ``"idle_timeout"`` rather
    than ``"first_byte_timeout"``. A builtin ``TimeoutError`` is the deadline.

    A timeout's message names the :class:`~polythink.config.Timeout` field that fired and
    its value in seconds (``no response within first_byte=2.0 s``), from ``timeouts`` (the
    source's) and ``streamed`` (a stream reads its head within ``first_byte``, else
    ``idle``, and its body within ``idle``; a non-streamed answer reads both within
    ``first_byte``); the deadline's names ``budget``, the seconds the call had left
    (:func:`deadline_error`). Without ``timeouts`` it names the field alone.

    Returns a :class:`RequestTimeoutError` for timeouts, else a :class:`TransientError`:
    ``"connection_error"`` (connect, reset, early EOF, SSL, a reply that breaks HTTP),
    ``"decoding_error"`` (a body that cannot be decoded), or, with ``should_retry=False``,
    a request the HTTP layer refuses to send to this source (an unsupported URL scheme, an
    illegal header value, a redirect loop) or an exception outside
    :data:`TRANSPORT_ERRORS` (``"http_layer_error"``: a fault of the HTTP layer itself,
    which another source may not share).

    The message names ``exc``'s class and words, redacted. ``exc`` becomes the result's
    ``__cause__`` only when no key is reachable from it (:func:`~polythink.errors.holds_secret`);
    raised outside the ``except`` that caught ``exc``, the result then has no
    ``__context__`` either, so nothing reaches the request's headers.
    """
    secrets = tuple(secrets)
    if isinstance(exc, PolythinkError):
        # A cloud signer's own error (a credential that cannot be found or refreshed),
        # raised from inside httpx's auth flow.
        return sealed(exc, secrets)
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        failure: PolythinkError = _timeout_error(
            exc, provider, source_index, stage, timeouts, streamed, budget
        )
    else:
        failure = _transport_error(exc, provider, source_index, secrets)
    mapped = sealed(failure, secrets)
    mapped.__cause__ = None if holds_secret(exc, secrets) else exc
    return mapped


def _seconds(value: float | None) -> str:
    """``value`` seconds as a message shows them: rounded to 0.01, at least one decimal
    (``2.0``, ``0.25``, ``600.0``)."""
    text = f"{value or 0:.2f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def deadline_error(provider: str, source_index: int, budget: float | None) -> RequestTimeoutError:
    """The error of a call that reached its deadline with ``budget`` seconds (what was left of
    ``Timeout.total`` or the call's ``timeout`` when this attempt started)."""
    return RequestTimeoutError(
        f"{provider}: deadline exceeded: no complete answer within the {_seconds(budget)} s "
        "left of the call's timeout (Timeout.total or timeout=)",
        provider=provider,
        source_index=source_index,
        error_type="deadline",
    )


def _timeout_error(
    exc: BaseException,
    provider: str,
    source_index: int,
    stage: str,
    timeouts: Timeout | None,
    streamed: bool,
    budget: float | None,
) -> RequestTimeoutError:
    """The :class:`RequestTimeoutError` of an httpx timeout or a ``TimeoutError``, its message
    naming the timeout and its seconds (see :func:`error_from_transport`)."""

    def limit(name: str) -> str:
        if timeouts is None:
            return f"the {name} timeout"
        return f"{name}={_seconds(getattr(timeouts, name))} s"

    fields: dict[str, Any] = {"provider": provider, "source_index": source_index}
    if isinstance(exc, httpx.ReadTimeout):
        # The read timeout in force: see HTTPTransport's _timeout and _stream_timeout.
        if stage == "body":
            kind = "idle_timeout"
            if streamed:
                what = f"stream idle for longer than {limit('idle')}"
            else:
                what = (
                    f"the answer's body paused longer than {limit('first_byte')} (the read "
                    "timeout of a non-streamed answer)"
                )
        else:
            kind = "first_byte_timeout"
            if streamed and timeouts is not None and timeouts.first_byte is None:
                what = (
                    f"no response within {limit('idle')} (first_byte is unset: a stream's "
                    "head waits at most idle)"
                )
            else:
                what = f"no response within {limit('first_byte')}"
        return RequestTimeoutError(f"{provider}: {what}", error_type=kind, **fields)
    for cls, kind, what in _TIMEOUT_KINDS:
        if isinstance(exc, cls):
            message = f"{provider}: {what.format(connect=limit('connect'))}"
            return RequestTimeoutError(message, error_type=kind, **fields)
    if budget is not None:
        return deadline_error(provider, source_index, budget)
    return RequestTimeoutError(
        f"{provider}: deadline exceeded (Timeout.total or timeout=)",
        error_type="deadline",
        **fields,
    )


def _transport_error(
    exc: BaseException,
    provider: str,
    source_index: int,
    secrets: Iterable[str | None],
) -> PolythinkError:
    words = " ".join(str(exc).split())
    detail = redact(f"{type(exc).__name__}: {words}", secrets)[:300]
    fields: dict[str, Any] = {"provider": provider, "source_index": source_index}
    for cls_, kind in _UNSENDABLE:
        if isinstance(exc, cls_):
            return TransientError(
                f"{provider}: the request cannot be sent ({detail})",
                error_type=kind,
                should_retry=False,
                **fields,
            )
    if isinstance(exc, httpx.DecodingError):
        return TransientError(
            f"{provider}: undecodable response body ({detail})",
            error_type="decoding_error",
            **fields,
        )
    if not isinstance(exc, TRANSPORT_ERRORS):
        return TransientError(
            f"{provider}: the HTTP layer failed ({detail})",
            error_type="http_layer_error",
            should_retry=False,
            **fields,
        )
    return TransientError(
        f"{provider}: connection error ({detail})", error_type="connection_error", **fields
    )
