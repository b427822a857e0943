"""Structured output: the answer turned into the caller's value, once it is whole.

:func:`parse_output` runs once per call on the assembled :class:`~polythink.types.Response`
(a cache hit included), never on stream deltas: it checks the stop signal first (a refusal
or a content filter, then the output limit), then decodes the text and validates it into the
``response_format``'s pydantic model class, or decodes it as JSON and validates it against a
dict schema (the caller's own, not the one rewritten for a wire) with ``jsonschema``. Every
failure is an :class:`~polythink.errors.OutputValidationError` carrying the raw text: a
structured call never returns without its ``parsed`` value (a turn that calls tools is the
one exception, see :attr:`Response.parsed`).

:class:`PartialJSON` is for user interfaces that render an object while it streams: feed it
the ``text`` deltas and ask for the partial value when redrawing.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any

from polythink.errors import (
    InvalidInputError,
    OutputRefusedError,
    OutputTruncatedError,
    OutputValidationError,
)
from polythink.types import Response, ResponseFormat
from polythink.wire_json import loads_json

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

__all__ = ["PartialJSON", "json_text", "parse_output", "parsed_or_none", "schema_validator"]

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
    model class's ``model_validate_json``, or decoded with :func:`json.loads` and validated
    against a dict schema (:func:`schema_validator`; ``json_object`` takes any object).

    Raises:
        OutputValidationError: the answer is empty, not JSON, or does not validate; its
            ``errors`` are pydantic's, jsonschema's in pydantic's shape (``type`` the
            failing keyword, ``loc`` the path in the answer), or ``json_invalid``.
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
            value = loads_json(body)
        except ValueError as exc:
            raise OutputValidationError(
                f"{_who(response)} answered text that is not JSON: {exc}",
                errors=[{"type": "json_invalid", "loc": (), "msg": str(exc)}],
                error_type="validation_error",
                **common,
            ) from exc
        if fmt.schema is None:
            if not isinstance(value, dict):
                raise OutputValidationError(
                    f"{_who(response)} answered JSON {type(value).__name__}, not an object",
                    errors=[{"type": "dict_type", "loc": (), "msg": "Input should be an object"}],
                    error_type="validation_error",
                    **common,
                )
        else:
            try:
                errors = _schema_errors(schema_validator(fmt), value)
            except Exception as exc:
                from referencing.exceptions import Unresolvable

                if not isinstance(exc, Unresolvable):
                    raise
                raise OutputValidationError(
                    f"{_who(response)}'s answer could not be checked: the response_format "
                    f"schema has a $ref that does not resolve within it ({_bounded(str(exc))}); "
                    "nothing is fetched, so put the definition in the schema's $defs",
                    errors=[{"type": "$ref", "loc": (), "msg": _bounded(str(exc))}],
                    error_type="validation_error",
                    **common,
                ) from None
            if errors:
                listed = "; ".join(
                    f"at {_json_path(error['loc'])}: {error['msg']}" for error in errors[:_LISTED]
                )
                count = f"{len(errors)}{'+' if len(errors) >= _MAX_ERRORS else ''}"
                raise OutputValidationError(
                    f"{_who(response)} answered JSON that does not validate against the "
                    f"response_format schema: {count} error(s), {listed}",
                    errors=errors,
                    error_type="validation_error",
                    **common,
                )
    return response.with_(parsed=value)


_LISTED = 3
"""Errors named in an :class:`OutputValidationError`'s message (all are in ``errors``)."""
_MAX_ERRORS = 20
"""Errors collected from one answer: enough to fix it, bounded for a long wrong answer."""
_MAX_MESSAGE = 200
"""Characters kept of one validator message (jsonschema quotes the failing value)."""
_VALIDATORS_SIZE = 512
_validators: dict[str, Validator | ValueError] = {}


def schema_validator(fmt: ResponseFormat[Any]) -> Validator:
    """The ``jsonschema`` validator of ``fmt``'s dict schema, built once per schema and
    remembered (by ``fmt.key``, up to 512 schemas); jsonschema is imported on the first one.

    The validator class follows the schema's ``$schema`` (Draft 4 to 2020-12), Draft
    2020-12 when it has none. ``format`` is not checked (an annotation in 2020-12, as
    jsonschema treats it by default); a ``$ref`` resolves within the schema only, nothing
    is fetched.

    Raises:
        ValueError: the schema is not valid under its draft (a failure is remembered too);
            the message names the draft, where, and what.
    """
    found = _validators.get(fmt.key)
    if found is None:
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError
        from jsonschema.validators import validator_for

        schema = dict(fmt.schema or {})
        cls = validator_for(schema, default=Draft202012Validator)
        try:
            cls.check_schema(schema)
            found = cls(schema)
        except SchemaError as exc:
            draft = cls.__name__.removesuffix("Validator")
            found = InvalidInputError(
                f"response_format schema is not a valid JSON Schema ({draft}): at "
                f"{exc.json_path}: {_bounded(exc.message)}"
            )
        if len(_validators) >= _VALIDATORS_SIZE:
            del _validators[next(iter(_validators))]
        _validators[fmt.key] = found
    if isinstance(found, ValueError):
        raise found
    return found


def _schema_errors(validator: Validator, value: Any) -> list[dict[str, Any]]:
    """The first errors of ``value`` against ``validator``, in pydantic's shape (``type`` is
    the failing keyword, ``loc`` the path in the answer)."""
    out: list[dict[str, Any]] = []
    for error in validator.iter_errors(value):
        out.append(
            {
                "type": str(error.validator),
                "loc": tuple(error.absolute_path),
                "msg": _bounded(error.message),
            }
        )
        if len(out) >= _MAX_ERRORS:
            break
    return out


def _json_path(loc: tuple[Any, ...]) -> str:
    """``("items", 0, "sku")`` as ``$.items[0].sku``."""
    out = "$"
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and part.isidentifier():
            out += f".{part}"
        else:
            out += f"[{json.dumps(part, ensure_ascii=False)}]"
    return out


def _bounded(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."


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
            raise InvalidInputError(
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
