"""Structured output: the answer turned into the caller's value, once it is whole.

:func:`parse_output` runs once per call on the assembled :class:`~polythink.types.Response`
(a cache hit included), never on stream deltas: it checks the stop signal first (a refusal
or a content filter, then the output limit), then decodes the text and validates it into the
``response_format``'s pydantic model class, or decodes it as JSON for a dict schema. Every
failure is an :class:`~polythink.errors.OutputValidationError` carrying the raw text: a
structured call never returns without its ``parsed`` value (a turn that calls tools is the
one exception, see :attr:`Response.parsed`).

:class:`PartialJSON` is for user interfaces that render an object while it streams: feed it
the ``text`` deltas and ask for the partial value when redrawing.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from polythink.errors import OutputRefusedError, OutputTruncatedError, OutputValidationError
from polythink.types import Response, ResponseFormat

__all__ = ["PartialJSON", "json_text", "parse_output", "parsed_or_none"]

_THINK_OPEN = "<think>"
_THINK_CLOSE = "</think>"
_FENCE = "```"


def json_text(text: str) -> str:
    """The JSON part of an answer: surrounding whitespace removed, and a leading
    ``<think>…</think>`` block (servers that put reasoning inline, §6 #15 of STRUCTURED.md)
    or a Markdown code fence around the JSON (models asked for JSON in the prompt only) taken
    away. Anything else is returned as it is, for the decoder to judge."""
    body = text.strip()
    if body.startswith(_THINK_OPEN):
        end = body.find(_THINK_CLOSE)
        body = body[end + len(_THINK_CLOSE) :].strip() if end >= 0 else ""
    if body.startswith(_FENCE):
        newline = body.find("\n")
        body = body[newline + 1 :] if newline >= 0 else ""
        if body.rstrip().endswith(_FENCE):
            body = body.rstrip()[: -len(_FENCE)]
        body = body.strip()
    return body


def _who(response: Response) -> str:
    return f"{response.provider} model {response.model!r}"


def _errors_of(exc: Exception) -> list[dict[str, Any]]:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            found = errors(include_url=False)
        except TypeError:
            found = errors()
        if isinstance(found, list):
            return [dict(error) for error in found]
    return [{"type": "value_error", "loc": (), "msg": str(exc)}]


def parse_output(response: Response, fmt: ResponseFormat[Any]) -> Response:
    """Return ``response`` with ``parsed`` set to its answer validated against ``fmt``.

    Order: a turn that calls tools is returned as it is (``parsed`` stays ``None``: run the
    tools and call again); a refusal (``response.refusal``) or a ``content_filter`` finish
    raises :class:`OutputRefusedError`; a ``length`` finish (the output limit, which
    reasoning tokens share on most wires) raises :class:`OutputTruncatedError`, even when
    the text happens to parse; then the text (see :func:`json_text`) is validated with the
    model class's ``model_validate_json``, or decoded with :func:`json.loads` for a dict
    schema (which must give an object when the schema's root, or ``json_object``, says so).

    Raises:
        OutputValidationError: the answer is empty, not JSON, or does not validate; its
            ``errors`` are pydantic's (or ``json_invalid``).
        OutputRefusedError: the model or the provider's filter refused.
        OutputTruncatedError: the output limit cut the answer.
    """
    if response.tool_calls and response.finish_reason == "tool_calls":
        return response
    common: dict[str, Any] = {
        "text": response.text,
        "response": response,
        "provider": response.provider,
        "source_index": response.source_index,
    }
    native = response.native_finish_reason or response.finish_reason
    if response.refusal is not None or response.finish_reason == "content_filter":
        if response.refusal:
            why = f"{_who(response)} refused to answer: {response.refusal}"
        else:
            why = f"{_who(response)} gave no answer: stopped for safety ({native})"
        raise OutputRefusedError(
            why,
            refusal=response.refusal,
            errors=[{"type": "refusal", "loc": (), "msg": response.refusal or native}],
            error_type="refusal",
            **common,
        )
    if response.finish_reason == "length":
        usage = response.usage
        spent = ""
        if usage is not None and usage.output_tokens is not None:
            spent = f" after {usage.output_tokens} output tokens"
            if usage.reasoning_tokens:
                spent += f" ({usage.reasoning_tokens} of them reasoning)"
        raise OutputTruncatedError(
            f"{_who(response)} reached the output limit{spent} ({native}) before its JSON "
            "was complete: raise max_tokens, or lower reasoning_effort",
            errors=[{"type": "truncated", "loc": (), "msg": f"finish reason {native}"}],
            error_type="truncated",
            **common,
        )
    body = json_text(response.text)
    if not body:
        hint = ""
        if response.reasoning:
            hint = (
                f"; its reasoning holds {len(response.reasoning)} characters (a server whose "
                "reasoning parser does not match the model can put the JSON there)"
            )
        raise OutputValidationError(
            f"{_who(response)} gave an empty answer{hint}",
            errors=[{"type": "json_invalid", "loc": (), "msg": "empty answer"}],
            error_type="empty_output",
            **common,
        )
    value: Any
    model = fmt.output_type
    if model is not None:
        try:
            value = model.model_validate_json(body)
        except ValueError as exc:
            errors = _errors_of(exc)
            first = errors[0] if errors else {}
            where = ".".join(str(part) for part in first.get("loc", ())) or "the root"
            raise OutputValidationError(
                f"{_who(response)} answered JSON that does not validate as {model.__name__}: "
                f"{len(errors)} error(s), first at {where}: {first.get('msg', exc)}",
                errors=errors,
                error_type="validation_error",
                **common,
            ) from exc
    else:
        try:
            value = json.loads(body)
        except ValueError as exc:
            raise OutputValidationError(
                f"{_who(response)} answered text that is not JSON: {exc}",
                errors=[{"type": "json_invalid", "loc": (), "msg": str(exc)}],
                error_type="validation_error",
                **common,
            ) from exc
        wants_object = fmt.kind == "json_object" or (fmt.schema or {}).get("type") == "object"
        if wants_object and not isinstance(value, dict):
            raise OutputValidationError(
                f"{_who(response)} answered JSON {type(value).__name__}, not an object",
                errors=[{"type": "dict_type", "loc": (), "msg": "Input should be an object"}],
                error_type="validation_error",
                **common,
            )
    return response.with_(parsed=value)


def parsed_or_none(response: Response, fmt: ResponseFormat[Any]) -> Response | None:
    """:func:`parse_output`'s response, or ``None`` when the answer does not fit ``fmt``
    (for a layer that only decides, such as the cache: the caller's own parse raises)."""
    try:
        return parse_output(response, fmt)
    except OutputValidationError:
        return None


class PartialJSON:
    """The value of a JSON answer while it streams, for rendering it as it grows.

    Feed it each ``text`` delta of a stream with ``response_format``; :meth:`value` gives
    what the text holds so far: a dict or list whose last string or number may be cut short
    and whose unfinished key is left out (pydantic-core's partial JSON parser, mode
    ``trailing-strings``), or ``None`` before the JSON starts. Nothing is validated: the
    ``done`` event's ``response.parsed`` is the validated value. :meth:`value` parses the
    whole text so far, so call it when the interface redraws rather than on every delta if
    answers are long. Needs pydantic-core (``pip install 'polythink[pydantic]'``)::

        partial = PartialJSON()
        async for event in client.stream(messages, response_format=Invoice):
            if event.type == "text":
                partial.feed(event.text)
                render(partial.value())  # {"number": "INV-1", "lines": [{"sku": "A"...
            elif event.type == "done":
                invoice = event.response.parsed  # an Invoice
    """

    __slots__ = ("_last", "_pieces")

    def __init__(self) -> None:
        self._pieces: list[str] = []
        self._last: Any = None

    def feed(self, delta: str) -> None:
        """Add one text delta."""
        self._pieces.append(delta)

    @property
    def text(self) -> str:
        """The text received so far."""
        return "".join(self._pieces)

    def value(self) -> Any:
        """The partial value so far (see the class); the last good one when the text is not
        JSON at this point.

        Raises:
            ValueError: pydantic-core is not installed.
        """
        try:
            from pydantic_core import from_json
        except ModuleNotFoundError as exc:
            raise ValueError(
                "PartialJSON needs pydantic-core: pip install 'polythink[pydantic]'"
            ) from exc
        text = self.text.lstrip()
        if text.startswith(_THINK_OPEN):
            end = text.find(_THINK_CLOSE)
            text = text[end + len(_THINK_CLOSE) :] if end >= 0 else ""
        starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
        if not starts:
            return self._last
        with contextlib.suppress(ValueError):
            self._last = from_json(text[min(starts) :], allow_partial="trailing-strings")
        return self._last
