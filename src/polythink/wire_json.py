"""JSON at polythink's edge: what comes in is read one way, what a caller adds to a body is
checked before it is sent.

- :func:`loads_json` reads JSON text from the other side (an answer, a stream event, an
  error body, a tool call's arguments, a batch result, a cache entry, a saved conversation),
  raising only ``ValueError`` for what it cannot read.
- :func:`check_extra_body` checks the fields a caller merges into a request body
  (``Source.extra_body``, a call's ``extra_body``): JSON, and none of the fields polythink
  sets itself (:data:`MANAGED_BODY_FIELDS`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import orjson

from polythink.errors import InvalidInputError
from polythink.types import check_json

__all__ = ["MANAGED_BODY_FIELDS", "check_extra_body", "loads_json"]


MANAGED_BODY_FIELDS = frozenset({"model", "stream", "messages", "input", "contents"})
"""Body fields polythink always sets itself; ``extra_body`` may not replace them."""


def check_extra_body(extra_body: Any, where: str) -> None:
    """Check an ``extra_body`` value: a dict JSON can represent that does not replace a
    managed field.

    Raises:
        ValueError: for a non-dict, a key in :data:`MANAGED_BODY_FIELDS`, or a value JSON
            cannot represent (:func:`~polythink.types.check_json`).
    """
    if extra_body is None:
        return
    if not isinstance(extra_body, Mapping):
        raise InvalidInputError(
            f"{where} must be a dict of body fields; got {type(extra_body).__name__}"
        )
    managed = sorted(MANAGED_BODY_FIELDS & set(extra_body))
    if managed:
        raise InvalidInputError(
            f"{where} may not set {', '.join(managed)}: polythink sets "
            f"{', '.join(sorted(MANAGED_BODY_FIELDS))} itself (use the source's model, "
            "the messages argument, and complete() or stream())"
        )
    check_json(extra_body, where)


def loads_json(data: str | bytes) -> Any:
    """Parse JSON text from the other side (an answer, an event, an error body, a tool call's
    arguments) as ``json.loads`` does, raising only ``ValueError`` for what it cannot read.

    orjson reads it first (several times faster, and its nesting limit, 1,024, turns
    ``[[[[…`` a hundred thousand deep into an error rather than a ``RecursionError`` that
    ``json`` raises); what orjson refuses and ``json`` takes (an integer beyond 64 bits, a
    lone surrogate escape, ``NaN``) is read by ``json``.

    Raises:
        ValueError: not JSON, or nested too deep to read.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(data)
    except RecursionError:
        raise InvalidInputError("JSON nested too deep to read") from None
