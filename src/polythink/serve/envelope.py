"""The envelope that carries a turn's reasoning through a client of another format.

A client speaks its front door's format only: Claude Code keeps Anthropic content blocks,
Codex keeps Responses items, an OpenAI SDK app keeps Chat messages. When the model that
answered speaks another wire, its reasoning (DeepSeek's ``reasoning_content``, Anthropic's
signed thinking blocks, Responses' ``encrypted_content``, Gemini's ``thoughtSignature`` s)
has no field of its own there. It rides in the field of the front door's format that such
clients send back unchanged (each door says which), sealed in one opaque string:

    ``pt1.`` + base64url(zlib(JSON ``{"f": format, "i": items, "r": text, "p": provider,
    "m": model}``))

so the next turn restores the assistant :class:`~polythink.types.Message` exactly as
polythink parsed it (``reasoning_format``, ``reasoning_items`` byte for byte, the reasoning
text), and the transport of whichever source takes that turn decides what it sends back
(its own format's items verbatim; another's left out with a note).

It is not signed: it grants nothing the caller could not send anyway. The provider checks
its own signatures and encrypted items; a forged or altered envelope fails there, with the
provider's error. A string that does not open (not ours, cut, too large) is left as the
client sent it.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from polythink.types import Message

__all__ = ["PREFIX", "Sealed", "open_envelope", "seal"]

PREFIX = "pt1."
"""What every envelope starts with (the format's version)."""

_MAX_OPENED = 16 << 20
"""Most bytes an envelope may inflate to: more is not an envelope polythink wrote."""


@dataclass(frozen=True, slots=True)
class Sealed:
    """What an envelope holds: the turn's reasoning as polythink parsed it."""

    reasoning_format: str | None
    reasoning_items: tuple[Mapping[str, Any], ...]
    reasoning: str | None
    provider: str | None = None
    model: str | None = None


def seal(message: Message, *, provider: str | None = None, model: str | None = None) -> str | None:
    """The envelope of an assistant ``message``'s reasoning, or ``None`` when it has none
    (no reasoning text and no opaque items)."""
    if not message.reasoning and not message.reasoning_items:
        return None
    data = {
        "f": message.reasoning_format,
        "i": [dict(item) for item in message.reasoning_items],
        "r": message.reasoning,
        "p": provider,
        "m": model,
    }
    packed = zlib.compress(orjson.dumps(data), 6)
    return PREFIX + base64.urlsafe_b64encode(packed).decode("ascii").rstrip("=")


def open_envelope(text: Any) -> Sealed | None:
    """The contents of an envelope :func:`seal` wrote; ``None`` for anything else."""
    if not isinstance(text, str) or not text.startswith(PREFIX):
        return None
    encoded = text[len(PREFIX) :]
    try:
        packed = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        inflater = zlib.decompressobj()
        raw = inflater.decompress(packed, _MAX_OPENED)
        if inflater.unconsumed_tail:
            return None
        data = orjson.loads(raw)
    except (binascii.Error, ValueError, zlib.error):
        return None
    if not isinstance(data, dict):
        return None
    items = data.get("i")
    fmt, reasoning = data.get("f"), data.get("r")
    if (
        not isinstance(items, list)
        or not all(isinstance(item, dict) for item in items)
        or not (fmt is None or isinstance(fmt, str))
        or not (reasoning is None or isinstance(reasoning, str))
    ):
        return None
    provider, model = data.get("p"), data.get("m")
    return Sealed(
        reasoning_format=fmt,
        reasoning_items=tuple(items),
        reasoning=reasoning,
        provider=provider if isinstance(provider, str) else None,
        model=model if isinstance(model, str) else None,
    )
