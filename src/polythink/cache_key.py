"""The cache key: which calls are the same call, as a SHA-256 of canonical JSON.

The key is the SHA-256 of :data:`KEY_VERSION`, the canonical JSON of the client's sources
(:func:`canonical_scope`), a newline, and the canonical JSON (object keys sorted at every
depth, array order kept) of the request (:func:`canonical_request`):

- every request field that reaches a provider: messages (with the reasoning items sent back),
  tools, ``tool_choice``, ``temperature``, ``top_p``, ``stop``, ``max_tokens``, the call's
  ``extra_body`` (case C05) and whether it streams;
- the effective requested reasoning tier of each source: the call's own tier, else the
  source's configured one, so asking per call for the tier a source already has shares its
  entry. The cache sits above the reasoning layer, so the tier a source would map it to is
  not known yet, and need not be;
- the identity of every source of the client, in order: provider, model, base URL, its
  fallback policy, ``drop_params``, its own ``extra_body``, the headers it sends that can
  change an answer (``anthropic-beta``, ``OpenAI-Beta`` …: see :func:`keyed_headers`), and a
  fingerprint of its credentials;
- the headers a call's ``extra_headers`` adds that can change an answer (a middleware of the
  client's own sets them before the cache);
- the call's ``cache_namespace`` when it has one (a gateway's tenant: no tenant reads an
  entry another's call filled).

Never a secret: a credential header (``authorization``, ``x-api-key`` …) is never in the
key, and the credentials are there only as the first 16 hex digits of the SHA-256 of the
source's key and credential header values, so two keys on one endpoint never share an
entry (tenants sharing one Redis cache would otherwise be served each other's answers, and
could tell from a hit what another asked). Never tracing headers, timeouts, limits or other
metadata. Because of the canonical form, two requests that differ only in the order of JSON
object keys share an entry (case C06).

Pure functions of the request and the sources, no I/O. :func:`digest` assembles the same
bytes piecewise (and resumes a conversation's unchanged prefix through :class:`Prefixes`),
so a call costs what is new in it, not the whole conversation.
"""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from polythink.budgets import fingerprint
from polythink.config import credential_header
from polythink.conversion import tools_memo
from polythink.types import Effort, Message, Request, Tool

if TYPE_CHECKING:
    from polythink.config import Source

__all__ = [
    "KEY_VERSION",
    "Prefixes",
    "cache_key",
    "canonical_json",
    "canonical_request",
    "canonical_scope",
    "digest",
    "effective_efforts",
    "keyed_headers",
    "message_fields",
]

KEY_VERSION = b"polythink-cache-v3\n"
"""Part of every key: raised whenever what counts as a complete success, or how an answer is
parsed, changes, so entries stored under the old rules miss instead of being served."""


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def canonical_json(value: Any) -> str:
    """Return ``value`` as canonical JSON: keys sorted at every depth, no spaces, UTF-8
    characters as they are (not escaped), any ``Mapping`` written as an object.

    Raises:
        TypeError: a value JSON cannot represent.
        ValueError: NaN or an infinity.
    """
    return json.dumps(
        value,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
        default=_plain,
    )


def message_fields(message: Message) -> dict[str, Any]:
    """Return the fields of ``message`` a provider sees (metadata is never sent), as the
    key's canonical JSON and a cache entry both write them. Chat's assistant ``refusal``,
    ``audio_id`` and ``function_call`` are written only when set, so the key of every
    other message is what it was before they existed; so are ``instructions`` and the
    metadata's ``prefix_mismatch``, which decide what a later call sends."""
    fields: dict[str, Any] = {
        "role": message.role,
        "content": message.content,
        "tool_calls": [[c.id, c.name, c.arguments] for c in message.tool_calls],
        "tool_call_id": message.tool_call_id,
        "name": message.name,
        "reasoning": message.reasoning,
        "reasoning_items": list(message.reasoning_items),
        "reasoning_format": message.reasoning_format,
    }
    if message.refusal is not None:
        fields["refusal"] = message.refusal
    if message.audio_id is not None:
        fields["audio_id"] = message.audio_id
    if message.function_call is not None:
        fields["function_call"] = [message.function_call.name, message.function_call.arguments]
    if message.instructions is not None:
        fields["instructions"] = message.instructions
    metadata = message.metadata
    if metadata is not None and metadata.prefix_mismatch is not None:
        # The one metadata field that decides what later calls send (block_binding).
        fields["prefix_mismatch"] = metadata.prefix_mismatch
    return fields


_UNKEYED_HEADERS = frozenset(
    {"traceparent", "tracestate", "baggage", "x-request-id", "x-correlation-id"}
)
"""Headers that name a request for tracing (W3C Trace Context and Baggage, request and
correlation ids): new on every call, they never change an answer."""


def keyed_headers(headers: Mapping[str, str] | None) -> dict[str, str] | None:
    """The headers of ``headers`` that are part of a cache key, names in lower case:
    every one except credentials (:func:`~polythink.config.credential_header`) and the
    tracing headers of :data:`_UNKEYED_HEADERS`; ``None`` when none is left."""
    if not headers:
        return None
    kept = {
        lowered: value
        for name, value in headers.items()
        if (lowered := name.lower()) not in _UNKEYED_HEADERS and not credential_header(name)
    }
    return kept or None


def _number(value: float | None) -> float | None:
    # 0 and 0.0 put the same value on the wire for a provider; give them one key.
    return None if value is None else float(value)


def effective_efforts(request: Request, defaults: Sequence[Effort | None]) -> list[str | None]:
    """The tier each source is asked for: the call's own, else the source's default (unset:
    ``None``), in source order; the same precedence as the reasoning layer's."""
    asked = request.reasoning_effort
    if asked is not None:
        return [asked.value] * len(defaults)
    return [d.value if d is not None else None for d in defaults]


def canonical_request(request: Request, defaults: Sequence[Effort | None] | None = None) -> str:
    """Return the canonical JSON of the fields of ``request`` that reach a provider.

    Object keys are sorted at every depth; array order (messages, tools, stop) is kept;
    ``temperature`` and ``top_p`` are compared as numbers (``0`` and ``0.0`` are equal).
    ``timeout``, ``cache``, message metadata (never sent) and the resolution (set later,
    per source) are not included. ``system_suffix``, ``prompt_cache``, ``response_format``
    and ``extra_headers`` (as ``request_headers``: those of :func:`keyed_headers`) are
    included only when set, so keys of calls without them are unchanged; a
    ``response_format`` is its canonical JSON (kind, schema, name, description, ``strict``:
    :attr:`ResponseFormat.key <polythink.types.ResponseFormat.key>`), so two schemas never
    share an entry, while two model classes with the same schema and name do (they send the
    same request). With ``defaults`` (the sources'
    configured tiers) ``reasoning_effort`` is the list of :func:`effective_efforts`;
    without, the call's own tier.

    Raises:
        TypeError: a field holds a value JSON cannot represent.
        ValueError: a field holds NaN or an infinity.
    """
    return canonical_json(
        {
            **_fields_around_messages(request, defaults),
            "messages": [message_fields(m) for m in request.messages],
            "max_tokens": request.max_tokens,
            "extra_body": request.extra_body,
        }
    )


def _fields_around_messages(
    request: Request, defaults: Sequence[Effort | None] | None, *, tools: bool = True
) -> dict[str, Any]:
    """The key's fields other than ``messages``, ``max_tokens`` and ``extra_body``: one list
    for :func:`canonical_request` and its fast path :func:`_around_messages`, which must
    agree byte for byte (without ``tools``, the fast path writes them itself)."""
    fields: dict[str, Any] = {}
    if request.cache_namespace is not None:
        fields["cache_namespace"] = request.cache_namespace
    if request.system_suffix is not None:
        fields["system_suffix"] = request.system_suffix
    if request.prompt_cache is not None:
        cache = request.prompt_cache
        fields["prompt_cache"] = [cache.key, cache.retention, cache.ttl, cache.breakpoints]
    if request.response_format is not None:
        fields["response_format"] = request.response_format.key
    if request.extra_headers:
        headers = keyed_headers(request.extra_headers)
        if headers is not None:
            fields["request_headers"] = headers
    if request.native is not None:
        # The caller's own body reaches a source of its wire as written, fields the typed
        # request leaves out included, and so do the headers that go with it.
        fields["native"] = [request.native.wire, request.native.key]
        native_headers = keyed_headers(request.native.headers)
        if native_headers is not None:
            fields["native_headers"] = native_headers
    effort: list[str | None] | str | None
    if defaults is not None:
        effort = effective_efforts(request, defaults)
    else:
        effort = request.reasoning_effort.value if request.reasoning_effort is not None else None
    fields.update(
        {
            "reasoning_effort": effort,
            "temperature": _number(request.temperature),
            "top_p": _number(request.top_p),
            "stop": list(request.stop) if request.stop is not None else None,
            "tool_choice": request.tool_choice,
            "stream": request.stream,
        }
    )
    if tools:
        fields["tools"] = _tool_fields(request.tools)
    return fields


def _tool_fields(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    return [
        {
            "name": t.name,
            "description": t.description,
            "parameters": t.parameters,
            "strict": t.strict,
        }
        for t in tools
    ]


def _tools_bytes(tools: tuple[Tool, ...]) -> bytes:
    return _canonical_bytes(_tool_fields(tools))


def canonical_scope(sources: Sequence[Source]) -> str:
    """Return the canonical JSON of the sources' identities (never a key).

    Per source, in order: provider, model, base URL in use, fallback policy,
    ``drop_params`` and ``extra_body``; and when set, ``thinking_display`` and
    ``reasoning_mode`` (they change what is sent and what comes back), ``headers`` (those of
    :func:`keyed_headers`) and ``credentials`` (the fingerprint of the source's key and
    credential header values, :meth:`~polythink.config.Source.secrets`). The configured
    effort is not here: it is part of the effective tiers in :func:`canonical_request`. The
    API version is not either: a call either goes out the same on both or is refused before
    sending.

    Raises:
        TypeError: an ``extra_body`` holds a value JSON cannot represent.
    """
    return canonical_json([_identity(s) for s in sources])


def _identity(source: Source) -> dict[str, Any]:
    identity: dict[str, Any] = {
        "provider": source.provider,
        "model": source.model,
        "base_url": source.endpoint,
        "effort_fallback": source.effort_fallback,
        "drop_params": source.drop_params,
        "extra_body": source.extra_body,
    }
    for name in ("thinking_display", "reasoning_mode"):
        if (value := getattr(source, name)) is not None:
            identity[name] = value
    headers = keyed_headers(source.headers)
    if headers is not None:
        identity["headers"] = headers
    secrets = source.secrets()
    if secrets:
        identity["credentials"] = fingerprint("\n".join(secrets))
    return identity


def digest(
    scope: bytes,
    request: Request,
    defaults: Sequence[Effort | None] | None = None,
    prefixes: Prefixes | None = None,
) -> str:
    """SHA-256 of the version, ``scope``, a newline and :func:`canonical_request`'s bytes.

    The bytes are assembled, not encoded whole: the fields sorted before ``messages``, each
    message's canonical bytes, the fields after. With ``prefixes``, the hash of a
    conversation's unchanged prefix is resumed, so only its new messages are encoded (a
    memo per message would cost more than it saves: the prefix covers the messages a
    conversation sends again). The digest is the one of the whole canonical JSON either way.
    """
    head, tail = _around_messages(request, defaults)
    start = KEY_VERSION + scope + b"\n" + head
    messages = request.messages
    if prefixes is None:
        sha = hashlib.sha256(start)
        sha.update(_messages_bytes(messages))
    else:
        sha = prefixes.resume(start, messages)
    sha.update(tail)
    return sha.hexdigest()


_TEXT = (str, type(None))
_NONE: tuple[()] = ()
"""An empty array in a plain message (a tuple: orjson writes it as ``[]``, and sharing one
spares the collector two containers a message)."""


def _plain_message(message: Message) -> dict[str, Any] | None:
    """The canonical dict of a message of strings only, keys in sorted order; ``None`` for
    any other message (content parts, reasoning items: values whose floats orjson and
    ``json`` write differently)."""
    content = message.content
    name = message.name
    reasoning = message.reasoning
    fmt = message.reasoning_format
    call_id = message.tool_call_id
    if (
        content.__class__ in _TEXT
        and not message.reasoning_items
        and message.refusal is None
        and message.audio_id is None
        and message.function_call is None
        and message.instructions is None
        and (message.metadata is None or message.metadata.prefix_mismatch is None)
        and reasoning.__class__ in _TEXT
        and call_id.__class__ in _TEXT
        and name.__class__ in _TEXT
        and fmt.__class__ in _TEXT
    ):
        calls = message.tool_calls
        return {
            "content": content,
            "name": name,
            "reasoning": reasoning,
            "reasoning_format": fmt,
            "reasoning_items": _NONE,
            "role": message.role,
            "tool_call_id": call_id,
            "tool_calls": [(c.id, c.name, c.arguments) for c in calls] if calls else _NONE,
        }
    return None


def _message_bytes(message: Message) -> bytes:
    """``canonical_json(message_fields(message)).encode()``, through orjson when it is the same:
    a message of strings only, written in sorted key order, is byte for byte what ``json``
    writes; any other message goes through ``json``."""
    plain = _plain_message(message)
    if plain is not None:
        try:
            return orjson.dumps(plain)
        except TypeError:
            pass  # a lone surrogate: json decides
    return canonical_json(message_fields(message)).encode()


def _messages_bytes(messages: Sequence[Message]) -> bytes:
    """The messages' canonical bytes joined by commas: one orjson call for the lot when
    every message is of strings only, as a conversation mostly is (3,000 messages in one
    call rather than 3,000 calls), else message by message."""
    plain = [_plain_message(m) for m in messages]
    if None not in plain:
        try:
            return orjson.dumps(plain)[1:-1]
        except TypeError:
            pass  # a lone surrogate somewhere: message by message, json deciding
    return b",".join([_message_bytes(m) for m in messages])


def _around_messages(
    request: Request, defaults: Sequence[Effort | None] | None = None
) -> tuple[bytes, bytes]:
    """The canonical request's bytes before its first message and after its last.

    Keys sort as ``extra_body``, ``max_tokens``, ``messages``, then the rest (the optional
    ``prompt_cache``, ``request_headers``, ``response_format`` and ``system_suffix`` among
    them), so the head is
    the first two fields and ``"messages":[``, the tail ``]`` and the rest, as
    :func:`canonical_request` has them. Calls alike in every field but their messages (a
    loop's calls, as a rule) share these bytes: kept by the fields' values
    (:func:`_around_key`), computed once.
    """
    key = _around_key(request, defaults)
    if key is not None:
        found = _around.get(key)
        if found is not None and found[0] is request.tools:
            return found[1], found[2]
    head = _canonical_bytes({"extra_body": request.extra_body, "max_tokens": request.max_tokens})
    fields = _fields_around_messages(request, defaults, tools=False)
    top_p = fields.pop("top_p")
    # ``tools`` and ``top_p`` sort last; the tools' bytes are kept with the tools tuple.
    rest = _canonical_bytes(fields)
    tools = tools_memo(request.tools, "cache-key", _tools_bytes) if request.tools else b"[]"
    tail = rest[1:-1] + b',"tools":' + tools + b',"top_p":' + _canonical_bytes(top_p) + b"}"
    around = head[:-1] + b',"messages":[', b"]," + tail
    if key is not None:
        if len(_around) >= _AROUND_KEPT:
            _around.clear()
        _around[key] = (request.tools, *around)
    return around


_around: dict[tuple[Any, ...], tuple[tuple[Tool, ...], bytes, bytes]] = {}
_AROUND_KEPT = 64


def _around_key(
    request: Request, defaults: Sequence[Effort | None] | None
) -> tuple[Any, ...] | None:
    """The values the bytes around the messages are made of, when every one is exact by
    equality (``None`` otherwise: a dict ``extra_body``, ``tool_choice`` or headers; a
    ``max_tokens`` that is not an int, which could equal a bool and be written otherwise).
    Numbers that the key writes as floats are taken as floats; the tools by the identity of
    their tuple, which the entry holds."""
    choice = request.tool_choice
    max_tokens = request.max_tokens
    if (
        request.extra_body is not None
        or request.extra_headers
        or request.native is not None
        or (choice is not None and choice.__class__ is not str)
        or (max_tokens is not None and max_tokens.__class__ is not int)
    ):
        return None
    fmt = request.response_format
    try:
        key = (
            max_tokens,
            request.system_suffix,
            request.prompt_cache,
            None if fmt is None else fmt.key,
            request.reasoning_effort,
            None if defaults is None else tuple(defaults),
            _number(request.temperature),
            _number(request.top_p),
            request.stop,
            choice,
            request.stream,
            id(request.tools),
        )
        hash(key)
    except (TypeError, ValueError):
        return None
    return key


def _orjson_exact(value: Any) -> bool:
    """Whether orjson writes ``value`` as :func:`canonical_json` does, byte for byte.

    Strings, booleans, ``None``, integers within 64 bits, floats from 1e-4 to 1e16 (where
    both write the shortest decimal form; outside it their exponent forms differ), and
    dicts with string keys and lists of those. Anything else (a Mapping that is not a dict,
    NaN, a large integer) is left to ``json``, which decides or raises.
    """
    stack = [value]
    pop = stack.pop
    extend = stack.extend
    while stack:
        item = pop()
        cls = item.__class__
        if cls is str or item is None or cls is bool:
            continue
        if cls is dict:
            for key in item:
                if key.__class__ is not str:
                    return False
            extend(item.values())
        elif cls is list or cls is tuple:
            extend(item)
        elif cls is int:
            if not -(2**63) <= item < 2**64:
                return False
        elif cls is float:
            if not (item == 0.0 or 1e-4 <= abs(item) < 1e16):
                return False
        else:
            return False
    return True


def _canonical_bytes(value: Any) -> bytes:
    """``canonical_json(value).encode()``, through orjson where it writes the same bytes."""
    if _orjson_exact(value):
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except TypeError:
            pass  # a lone surrogate: json decides
    return canonical_json(value).encode()


class Prefixes:
    """The hash state after the messages of recent conversations, to resume from.

    An agent loop sends its conversation again with two more messages each turn, and a
    caller that asks again with another last prompt sends it again with its last message
    replaced; the hash of what was sent before is kept (with the head it started from and
    the messages, held by identity) after the last message and after the one before it,
    and resumed, so a call hashes only its new messages. Only conversations seen before
    (their first message, by identity, began an earlier request) are kept, up to ``size``
    states, the least recently used dropped first; the newest other one waits in a trial
    slot, so conversations rebuilt from dicts on every call hold at most one conversation
    here.
    """

    __slots__ = ("_entries", "_roots", "_size", "_trial")

    _LOOKBACK = 8
    """How many of the newest messages may be new since a kept prefix."""

    def __init__(self, size: int = 32) -> None:
        self._entries: dict[int, tuple[bytes, tuple[Message, ...], Any]] = {}
        self._roots: dict[int, Message] = {}
        self._size = size
        self._trial: dict[int, tuple[bytes, tuple[Message, ...], Any]] = {}

    def resume(self, start: bytes, messages: tuple[Message, ...]) -> Any:
        """The hash of ``start`` and the messages' canonical bytes joined by commas."""
        entries = self._entries
        trial = self._trial
        digest = None
        done = 0
        count = len(messages)
        for end in range(count, max(0, count - self._LOOKBACK), -1):
            last = id(messages[end - 1])
            found = entries.get(last) or trial.get(last)
            if found is None:
                continue
            head, kept, state = found
            if head == start and len(kept) == end and all(map(operator.is_, kept, messages)):
                digest, done = state.copy(), end
                break
        if digest is None:
            digest = hashlib.sha256(start)
        if not messages:
            return digest
        before_last = None
        if done < count - 1:
            fresh = _messages_bytes(messages[done : count - 1])
            digest.update(b"," + fresh if done else fresh)
            done = count - 1
        if done == count - 1:
            if done:
                before_last = digest.copy()
            last_bytes = _messages_bytes(messages[done:])
            digest.update(b"," + last_bytes if done else last_bytes)
        kept_states = [(id(messages[-1]), (start, messages, digest.copy()))]
        if before_last is not None:
            kept_states.append((id(messages[-2]), (start, messages[:-1], before_last)))
        if self._seen(messages[0]):
            for key, entry in kept_states:
                entries.pop(key, None)
                entries[key] = entry
            while len(entries) > self._size:
                del entries[next(iter(entries))]
        else:
            self._trial = dict(kept_states)
        return digest

    def _seen(self, root: Message) -> bool:
        roots = self._roots
        if roots.get(id(root)) is root:
            return True
        roots[id(root)] = root
        if len(roots) > 16 * self._size:
            del roots[next(iter(roots))]
        return False


def cache_key(request: Request, sources: Sequence[Source]) -> str:
    """Return the cache key (64 hex characters) of ``request`` sent to ``sources``.

    Raises:
        TypeError, ValueError: as :func:`canonical_request`.
    """
    return digest(canonical_scope(sources).encode(), request, [s.effort for s in sources])
