"""The error taxonomy: one base class and the classes a caller can act on.

Runtime failures of a call are one of four kinds, each carrying the provider, the source
index, the HTTP status, the provider's own error type, the request id, the server's
retry-after (seconds) and a redacted copy of the body:

- :class:`RateLimitedError`: 429, and in-band rate-limit errors.
- :class:`TransientError`: 5xx, 529/overloaded, connection failures, timeouts, a stream
  cut before its first token.
- :class:`RequestRejectedError`: 400, 404, 413, 422, and a reasoning configuration that the
  source cannot satisfy at request time; :class:`ModelNotFoundError` when the provider says
  the model does not exist or was retired; :class:`ThinkingBindingError` when Anthropic
  refuses a replayed thinking block bound to a different conversation.
- :class:`AuthError`: 401, 403, and 402 / billing errors.

:class:`StreamInterruptedError` is raised when a stream breaks after its first token; it
carries what was assembled so far; :class:`ClientClosedError` is a call on a closed client;
:class:`ClientLoopError` a client used from an event loop other than its own;
:class:`MiddlewareError` is a layer of the caller's own that broke the middleware contract.
A call with ``response_format`` whose answer does not fit it raises
:class:`OutputValidationError` (:class:`OutputRefusedError`, :class:`OutputTruncatedError`);
a source that cannot produce that format at all refuses it before sending with
:class:`OutputFormatUnsupportedError`. :class:`BudgetExceededError` is a call a spend budget
cannot afford, refused before it is sent.
Bad input (a message, a tool, an argument, a source, a configuration file) raises
:class:`InvalidInputError`, a ``ValueError`` too, before anything is sent: when the value is
built or the client started. It and :class:`PolythinkError` are defined in
:mod:`polythink.types`, so the value types can raise them without importing this module;
they are this module's names.

API keys never appear in a message, repr or body of these errors: bodies pass through
:func:`redact` at the transport boundary, and an error from below (httpx, aiohttp, the
socket) is chained as ``__cause__`` only when no string reachable from it holds a key
(:func:`holds_secret`); httpx's errors hold the request, headers included, so theirs are
not chained and their class and redacted words are in the message instead.
"""

from __future__ import annotations

import errno
import types
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from polythink.types import KEY_SHAPES, InvalidInputError, PolythinkError

if TYPE_CHECKING:
    from polythink.types import Response

__all__ = [
    "AuthError",
    "BatchItemNotRunError",
    "BudgetExceededError",
    "CapacityUnavailableError",
    "ClientClosedError",
    "ClientLoopError",
    "ConfigFileNotFoundError",
    "ContentFilterError",
    "ContentUnsupportedError",
    "ContextWindowExceededError",
    "InvalidInputError",
    "MiddlewareError",
    "ModelNotFoundError",
    "OutputFormatUnsupportedError",
    "OutputRefusedError",
    "OutputTruncatedError",
    "OutputValidationError",
    "PolythinkError",
    "RateLimitedError",
    "RequestRejectedError",
    "RequestTimeoutError",
    "ResponseTooLargeError",
    "ServiceTierUnsupportedError",
    "StreamInterruptedError",
    "ThinkingBindingError",
    "ThinkingUnsupportedError",
    "TransientError",
    "holds_secret",
    "recast",
    "redact",
]


class RateLimitedError(PolythinkError):
    """The provider refused the call for rate or quota (HTTP 429 or an in-band rate error).

    An exhausted quota or spend limit (OpenAI ``insufficient_quota``) is a 429 too, but
    waiting does not lift it: it carries ``should_retry=False`` so the retry layer gives up
    at once and failover moves on. Without a ``status_code`` it is polythink's own rate
    limiter refusing a call it could not send in time (``error_type`` names the limit).
    """


class TransientError(PolythinkError):
    """A failure that may pass on retry or on another source.

    HTTP 408, 409, 5xx and 529 (``error_type`` ``"overloaded_error"`` on Anthropic), an
    in-band server error, a connection that failed or broke before the first token
    (``error_type`` ``"connection_error"``), a body that is not what the wire promises
    (``"malformed_body"``), or a request the HTTP layer could not send to this source at
    all (``should_retry=False``: retrying cannot help, another source may).
    """


class CapacityUnavailableError(TransientError):
    """The provider has no capacity at the asked service tier now; nothing was charged.

    Its own kind, not a rate limit: OpenAI's 429 ``resource_unavailable`` on ``flex`` and
    Groq's HTTP 498 ``capacity_exceeded`` on ``flex`` (each provider's pair is data on its
    :class:`~polythink.providers.TierWire`, ``no_capacity``). It never pauses the source's
    rate limiter nor counts against its circuit breaker: the source's other tiers are fine.
    The tier layer sends the call once more at the source's ``capacity_fallback``
    (``standard`` by default); without one it is retried with backoff like any
    :class:`TransientError`, and fails over.

    Attributes:
        service_tier: the tier that had no capacity (``"flex"``), when known.
    """

    def __init__(self, message: str, *, service_tier: str | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.service_tier = service_tier


class RequestTimeoutError(TransientError):
    """A timeout; ``error_type`` says which one fired.

    - ``"connect_timeout"``: establishing the connection took longer than ``Timeout.connect``.
    - ``"first_byte_timeout"``: no response head within ``Timeout.first_byte`` of sending
      (for a stream with ``first_byte`` unset, within ``Timeout.idle``).
    - ``"idle_timeout"``: a stream was silent for longer than ``Timeout.idle``.
    - ``"write_timeout"`` / ``"pool_timeout"``: sending the body, or waiting for a free
      connection in the pool, took longer than ``Timeout.connect``.
    - ``"deadline"``: the call's total deadline (``Timeout.total`` or the per-call
      ``timeout``) passed.
    """


class ResponseTooLargeError(TransientError):
    """The answer went past one of the source's read limits and was not read further.

    The limits are :class:`~polythink.config.ReadLimits` (``Source(read_limits=...)``):
    ``max_line`` (one server-sent-events line), ``max_event`` (one event's data),
    ``max_body`` (bytes received for the answer) and ``max_decoded`` (bytes after the
    ``content-encoding`` is undone: a gzip bomb). ``error_type`` is
    ``"response_too_large"``; ``should_retry`` is ``False`` (the same server would send the
    same again) while failover moves on, another source may answer within the limits. After a
    stream's first output it is the cause of a :class:`StreamInterruptedError`.

    Attributes:
        limit: the name of the :class:`~polythink.config.ReadLimits` field that was passed
            (``"max_line"``, ``"max_event"``, ``"max_body"``, ``"max_decoded"``).
        limit_value: its value (characters for a line or an event, bytes for the others).
    """

    def __init__(self, message: str, *, limit: str, limit_value: int, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.limit = limit
        self.limit_value = limit_value


class RequestRejectedError(PolythinkError):
    """The provider (or polythink, before sending) rejected the request as invalid.

    HTTP 400, 404, 413, 422; also a request polythink refuses locally because the provider
    would reject it (for example ``temperature`` with Anthropic thinking on).
    """


class ContextWindowExceededError(RequestRejectedError):
    """The prompt (with the asked output ceiling) does not fit the model's context window.

    Recognised from each provider's "prompt too long" / "maximum context length" 4xx (see
    :func:`polythink.transports.error_map.context_window_error`). Failover sends the call on
    only to a later source whose model has a larger ``Capability.context_window``; otherwise
    it is raised at once, since every source with an equal or smaller window would refuse.

    Attributes:
        limit: the window in tokens as the provider stated it, else ``None``.
        requested: the tokens the request needed as the provider stated them (prompt, plus
            the output ceiling where the provider adds it), else ``None``.
    """

    def __init__(
        self,
        message: str,
        *,
        limit: int | None = None,
        requested: int | None = None,
        **kwargs: object,
    ) -> None:
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.limit = limit
        self.requested = requested


class ThinkingBindingError(RequestRejectedError):
    """Anthropic refused a replayed thinking block: "bound to a different conversation".

    Since 2026-09 the newest Claude models bind each thinking block to what came before it
    (the top-level ``system``, the ``tools`` and every earlier message) and check it when the
    block comes back (CONTINUITY.md §1.2-1.4). A request that changed any of that, or left a
    thinking block out of the middle, fails with HTTP 400 ``invalid_request_error``: on
    Fable 5.2 and Mythos 5.2 for every account, on Fable 5.1 and Opus 5.5 for accounts
    created from 2026-08-31, and on any model that asked for ``prefix_mismatch="error"``.
    It is decided before any output, and the same body fails again, so it is never retried
    as is; failover does not move on (every source would get the same history). With
    ``prefix_mismatch="drop_block"`` polythink sends the call once more with the API told to
    drop such blocks, and the conversation keeps that choice
    (:attr:`~polythink.MessageMetadata.prefix_mismatch`).

    The message says what changed (the API's own sentence, when it names it) and how to fix
    it: send the conversation as polythink returned it (append ``response.message`` and new
    turns; keep the system prompt and tools; put what changes per call in ``system_suffix``),
    allow dropping with ``prefix_mismatch="drop_block"``, or strip the thinking blocks once
    (:func:`polythink.conversation.strip_reasoning`).

    Attributes:
        path: the first failing block, as the API names it (``"messages.3.content.0"``), else
            ``None``.
        changed: the API's sentence naming what changed (the ``system`` prompt, the
            ``tools``), else ``None``.
        beta_missing: the API said ``drop_block`` needs the beta
            ``thinking-binding-controls-2026-08-01`` in ``anthropic-beta``.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        changed: str | None = None,
        beta_missing: bool = False,
        **kwargs: object,
    ) -> None:
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.path = path
        self.changed = changed
        self.beta_missing = beta_missing


class ModelNotFoundError(RequestRejectedError):
    """The provider does not serve the model: it does not exist, was retired or decommissioned.

    Recognised from each provider's own answer (see
    :func:`polythink.transports.error_map.model_not_found_error`): OpenAI's 404
    ``model_not_found``, Anthropic's 404 ``not_found_error`` naming the model, Gemini's 404
    ``NOT_FOUND`` "models/… is not found", Groq's 400 ``model_decommissioned``. A plain 404
    (a wrong base URL, "404 page not found") stays a :class:`RequestRejectedError`. Failover
    moves on to the next source, whose model may well exist.

    Attributes:
        model: the model the source asked for, else ``None``.
        replacement: the model the registry names as its replacement, else ``None``; the
            message names it too.
    """

    def __init__(
        self,
        message: str,
        *,
        model: str | None = None,
        replacement: str | None = None,
        **kwargs: object,
    ) -> None:
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.model = model
        self.replacement = replacement


class ContentFilterError(RequestRejectedError):
    """The provider's content filter refused the prompt: Azure OpenAI's HTTP 400 with
    ``code: "content_filter"`` ("The response was filtered due to the prompt triggering Azure
    OpenAI's content management policy", inner code ``ResponsibleAIPolicyViolation``;
    CLOUDS.md §3.1). Another source, without that filter, may take the call, so failover
    moves on. A completion the filter stopped is not an error: the response's
    ``finish_reason`` is ``content_filter`` and its ``refusal`` names the categories.

    Attributes:
        content_filter_result: the filter's verdict per category as the provider sent it
            (``{"violence": {"filtered": True, "severity": "high"}, "jailbreak": {"filtered":
            False, "detected": False}, …}``), or ``None`` when it sent none.
    """

    def __init__(
        self,
        message: str,
        *,
        content_filter_result: Mapping[str, Any] | None = None,
        **kwargs: object,
    ) -> None:
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.content_filter_result = content_filter_result

    @property
    def filtered(self) -> list[str]:
        """The categories the filter flagged (``filtered`` or ``detected`` true), in order."""
        found = []
        for name, verdict in (self.content_filter_result or {}).items():
            if isinstance(verdict, Mapping) and (
                verdict.get("filtered") or verdict.get("detected")
            ):
                found.append(name)
        return found


class AuthError(PolythinkError):
    """The credentials were missing, wrong or not allowed (HTTP 401, 403).

    Also HTTP 402 and Anthropic's ``billing_error``: the account cannot pay for the call,
    which no retry fixes but another source may.
    """


class ThinkingUnsupportedError(RequestRejectedError, ValueError):
    """A reasoning configuration that this source cannot satisfy.

    Raised when a requested tier is not accepted by the model under the ``error`` policy,
    when ``none`` is asked of a model that cannot switch reasoning off (the message names
    the cheapest tier to use instead), or when the provider's wire for the direction is
    unknown. It is a ``ValueError`` so configuration checks at client build can raise it,
    and a :class:`RequestRejectedError` so a per-call request fails over to the next source.
    """


class ServiceTierUnsupportedError(RequestRejectedError, ValueError):
    """A service tier this source cannot serve, under ``service_tier_fallback="error"``.

    Raised when the provider has no service tiers, or the model does not take the tier (the
    message lists those it takes, as the registry knows them or as the provider taught by
    refusing one); ``error_type`` ``"service_tier_unsupported"``. A ``ValueError`` so a
    source's own tier is refused when the client is built, and a
    :class:`RequestRejectedError` that fails over to the next source on a call.
    """


class ContentUnsupportedError(RequestRejectedError, ValueError):
    """A content part this source's wire cannot carry; refused before sending.

    The message names the message and part index, the part's type and the types the wire
    accepts (``error_type`` ``"unsupported_content"``). Sending it would have the provider
    reject the call, or drop the part. Failover moves on: another source's wire may carry
    it (an ``input_audio`` part refused by Anthropic is taken by an OpenAI source).
    """


class OutputFormatUnsupportedError(RequestRejectedError, ValueError):
    """A source cannot produce the requested ``response_format``; refused before sending.

    For example a schema its wire cannot express (the message says what to change), a
    combination its provider rejects (JSON output with function tools on Gemini before
    Gemini 3), or ``strict=True`` where the provider has no constrained decoding. Failover
    moves on: another source may take the call.
    """


class OutputValidationError(PolythinkError, ValueError):
    """The answer does not fit the call's ``response_format``; nothing was parsed.

    Raised by ``Client.complete`` (and at the end of ``Client.stream``, after the text
    events) instead of returning a ``Response`` whose ``parsed`` would be missing. Never
    retried: the call itself succeeded.

    Attributes:
        text: the answer's raw text, as the model wrote it.
        errors: what is wrong, one dict per problem in pydantic's shape (``type``, ``loc``,
            ``msg``): pydantic's own errors for a model class, ``json_invalid`` for text
            that is not JSON, ``refusal`` or ``truncated`` for the subclasses.
        response: the whole :class:`~polythink.types.Response` (usage, cost, warnings,
            ``finish_reason``), ``None`` only when built without one.
    """

    def __init__(
        self,
        message: str,
        *,
        text: str = "",
        errors: list[dict[str, Any]] | None = None,
        response: Response | None = None,
        **kwargs: object,
    ) -> None:
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.text = text
        self.errors: list[dict[str, Any]] = list(errors or ())
        self.response = response


class OutputRefusedError(OutputValidationError):
    """The model refused, or the provider's safety filter stopped the answer.

    The same on every wire: OpenAI Chat ``message.refusal``, Responses ``refusal`` content
    parts, Anthropic ``stop_reason: "refusal"``, and any ``content_filter`` finish (Gemini
    ``SAFETY`` and the like, OpenAI ``content_filter``).

    Attributes:
        refusal: the model's refusal message where the provider sent one, else ``None``.
    """

    def __init__(self, message: str, *, refusal: str | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.refusal = refusal


class OutputTruncatedError(OutputValidationError):
    """The answer was cut by the output limit (``finish_reason == "length"``) before its JSON
    was complete. Reasoning tokens count against the same limit on most wires: raise
    ``max_tokens`` or lower ``reasoning_effort``."""


class StreamInterruptedError(PolythinkError):
    """A stream broke after its first token reached the caller; it is never retried.

    Attributes:
        partial: the :class:`~polythink.types.Response` assembled from what was streamed
            before the break: ``finish_reason == "error"``, ``interrupted=True`` (its
            message's metadata too). Always set: every stream polythink raises this from
            passes what it assembled; one built without ``partial=`` gets an empty
            interrupted response (no text, no tool calls, no usage).
    """

    def __init__(self, message: str, *, partial: Response | None = None, **kwargs: object):
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.partial: Response = partial if partial is not None else self._empty_partial()

    def _empty_partial(self) -> Response:
        from polythink.types import Message, MessageMetadata, Response

        metadata = MessageMetadata(
            provider=self.provider, source_index=self.source_index, interrupted=True
        )
        return Response(
            text="",
            reasoning=None,
            tool_calls=[],
            finish_reason="error",
            usage=None,
            model="",
            provider=self.provider or "",
            source_index=self.source_index if self.source_index is not None else 0,
            message=Message(role="assistant", content="", metadata=metadata),
            interrupted=True,
        )


class BudgetExceededError(PolythinkError):
    """A spend budget cannot afford the call: it was not sent.

    Raised before anything reaches the provider, when the call's worst-case cost (its
    prompt as estimated for tokens per minute, plus its output ceiling priced as output)
    does not fit what is left of a :class:`~polythink.Budget` in its current window, or when
    a budget that refuses unpriced models cannot price the source's model (``error_type``
    ``"unpriced"``), or when a budget shared on Redis cannot be read and this process never
    read what it spent (``error_type`` ``"spend_unknown"``: Redis has not answered it in the
    budget's window, and no ``workers=`` gives it a share; see
    :class:`~polythink.backends.redis.RedisLimitStore`). Failover then tries the next
    source; when no source fits, the caller gets the last one's error. ``retry_after`` is
    the seconds until the window resets (``None`` for ``"spend_unknown"``).

    Attributes:
        budget: the name of the budget that refused (the tightest, when several would).
        scope: what the budget counted this call under (``"all"``, an account, a model, a
            tier or a tag).
        window: ``"minute"``, ``"hour"``, ``"day"`` or ``"month"`` (UTC calendar windows).
        limit: the budget in US dollars per window (while the shared budget store does not
            answer: this process's share of it, see :class:`~polythink.backends.base.Tally`;
            0 when its spend is unknown).
        spent: US dollars counted in this window so far, calls in flight included (while
            the store does not answer: counted against that share).
        remaining: ``limit - spent`` (never below 0).
        needed: the call's worst-case cost in US dollars (``None`` when it has no price).
        resets_at: when the window ends, in Unix seconds (UTC).
    """

    def __init__(
        self,
        message: str,
        *,
        budget: str,
        scope: str,
        window: str,
        limit: float,
        spent: float,
        needed: float | None,
        resets_at: float,
        **kwargs: object,
    ) -> None:
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.budget = budget
        self.scope = scope
        self.window = window
        self.limit = limit
        self.spent = spent
        self.remaining = max(0.0, limit - spent)
        self.needed = needed
        self.resets_at = resets_at


class BatchItemNotRunError(PolythinkError):
    """A request of a batch that the provider never ran: the batch expired (its 24-hour
    window ended first), was cancelled, or failed as a whole (its input was refused).
    Nothing was charged for it. ``error_type`` is ``"batch_expired"``,
    ``"batch_cancelled"`` or ``"batch_failed"``.

    Attributes:
        reason: ``"expired"``, ``"cancelled"`` or ``"failed"``.
        custom_id: the request's id in the batch.
    """

    def __init__(self, message: str, *, reason: str, custom_id: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.reason = reason
        self.custom_id = custom_id


class ClientClosedError(PolythinkError, RuntimeError):
    """A call or a stream used a :class:`~polythink.Client` after it was closed.

    Raised by ``complete`` and ``stream`` once ``aclose()`` ran (or the ``async with`` block
    ended), by a stream still being read at that moment, on either HTTP layer, and when the
    ``http_client`` given to the client was closed by its owner. It is a ``RuntimeError``
    too, like httpx's own error for a closed client. A closed client opens again with
    ``async with client:`` or ``client.start()``.
    """


class ClientLoopError(PolythinkError, RuntimeError):
    """A :class:`~polythink.Client` was used from an event loop other than its own.

    Its connection pool (and a Redis pool, a cache writer) belongs to the asyncio loop it was
    started in; after that loop ends (one ``asyncio.run()`` per call, a web framework that
    runs each request in a fresh loop) nothing can be sent through them. Raised by
    ``complete`` and ``stream`` before anything is sent; create the client inside the loop
    that uses it (or close it and ``start()`` it again there). A ``RuntimeError`` too.
    """


class ConfigFileNotFoundError(InvalidInputError, FileNotFoundError):
    """No file at the path given for a TOML configuration (:meth:`polythink.Client.from_toml`,
    ``polythink serve --config``).

    An :class:`InvalidInputError` (so a ``ValueError``) and a ``FileNotFoundError`` as
    ``open`` raises it: ``errno`` is ``ENOENT`` and ``filename`` the path; the message names
    the path.
    """

    def __init__(self, message: str, filename: str) -> None:
        super().__init__(message)
        self.errno = errno.ENOENT
        self.strerror = "No such file or directory"
        self.filename = filename


class MiddlewareError(PolythinkError, TypeError):
    """A layer given in ``middleware=`` broke the middleware contract during a call.

    Raised where the layer hands its result on, naming the layer and its position, for: a
    ``complete`` that returned something other than a :class:`~polythink.types.Response`; a
    ``stream`` that returned something other than an async iterator, yielded something other
    than a :class:`~polythink.types.StreamEvent`, yielded after its ``done`` event, ended
    without one, or whose ``done`` event carries no ``Response``; and a ``call_next`` called
    with something other than a :class:`~polythink.types.Request`. It is a ``TypeError`` too:
    the layer's code is wrong, so neither retry nor failover acts on it.

    An exception a layer raises itself is not wrapped: a :class:`PolythinkError` is retried
    and failed over like one from the provider, any other reaches the caller unchanged.

    Attributes:
        layer: the layer's class and position, for example
            ``"AuditLog (Client middleware[0])"``.
    """

    def __init__(self, message: str, *, layer: str, **kwargs: object) -> None:
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.layer = layer


_E = TypeVar("_E", bound=PolythinkError)


def recast(error: PolythinkError, cls: type[_E], message: str | None = None, **extra: Any) -> _E:
    """``error`` as another class of the taxonomy (a provider's answer read more closely):
    its provider, source, status, type, request id, retry hints, body and rate limits kept,
    ``message`` replacing its message when given, ``extra`` the new class's own fields."""
    mapped = cls(
        error.message if message is None else message,
        provider=error.provider,
        source_index=error.source_index,
        status_code=error.status_code,
        error_type=error.error_type,
        request_id=error.request_id,
        retry_after=error.retry_after,
        should_retry=error.should_retry,
        body=error.body,
        **extra,
    )
    mapped.rate_limit = error.rate_limit
    return mapped


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """Return ``text`` with API keys replaced by ``[REDACTED]``.

    Replaces every given secret verbatim, and as ``repr`` escapes it (an HTTP library's
    message quoting an illegal header value ``b'key\\n'``), then anything shaped like a
    known provider key (``sk-…``, ``AIza…``, ``Bearer …``, ``xai-…``, ``gsk_…``). Secrets
    shorter than 4 characters are ignored (replacing them would mangle ordinary text).
    """
    for secret in secrets:
        if not secret or len(secret) < 4:
            continue
        for form in (secret, repr(secret)[1:-1]):
            if form in text:
                text = text.replace(form, "[REDACTED]")
    return KEY_SHAPES.sub("[REDACTED]", text)


_OPAQUE = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.CodeType,
    types.FrameType,
    types.TracebackType,
    types.CoroutineType,
    types.AsyncGeneratorType,
    types.GeneratorType,
)
_SCALARS = (int, float, complex, bool, type(None))
_WALK_LIMIT = 5000


def holds_secret(value: Any, secrets: Iterable[str | None] = ()) -> bool:
    """Whether a key may be reachable from ``value`` (an exception, usually).

    Walks what a caller can reach without a traceback: strings and bytes, mappings and
    sequences, an exception's ``str``, ``repr``, ``args``, ``__cause__``, ``__context__``
    and notes, and every object's attributes (``__dict__`` and slots), and looks in each
    string for one of ``secrets`` or a key-shaped token (see :func:`redact`). Frames,
    tracebacks, code and types are not walked. A graph larger than 5000 objects counts as
    holding one: this decides whether an error from below may be chained, and when in
    doubt it is not.
    """
    wanted = [s for s in secrets if s and len(s) >= 4]

    def secret_in(text: str) -> bool:
        return any(s in text for s in wanted) or KEY_SHAPES.search(text) is not None

    seen: set[int] = set()
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if id(item) in seen or isinstance(item, (*_SCALARS, *_OPAQUE)):
            continue
        seen.add(id(item))
        if len(seen) > _WALK_LIMIT:
            return True
        if isinstance(item, str):
            if secret_in(item):
                return True
            continue
        if isinstance(item, bytes | bytearray | memoryview):
            if secret_in(bytes(item).decode("latin-1")):
                return True
            continue
        if isinstance(item, BaseException):
            try:
                shown = f"{item}\n{item!r}"
            except Exception:
                return True
            if secret_in(shown):
                return True
            stack.extend((item.args, item.__cause__, item.__context__))
            stack.append(getattr(item, "__notes__", None))
        if isinstance(item, Mapping):
            try:
                stack.extend(item.items())
            except Exception:
                return True
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)
        attributes = getattr(item, "__dict__", None)
        if isinstance(attributes, dict):
            stack.extend(attributes.values())
        for cls in type(item).__mro__:
            slots = getattr(cls, "__slots__", ())
            for name in (slots,) if isinstance(slots, str) else slots:
                if isinstance(name, str):
                    stack.append(getattr(item, name, None))
    return False
