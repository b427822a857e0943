"""Anthropic's thinking-block binding as the simulator plays it (CONTINUITY.md §1).

Each thinking block the simulated model writes carries a signature that records, under a
keyed digest: the model that wrote it, the digests of the request's top-level ``system``,
its ``tools`` and every message before the block (thinking blocks and cache markers left
out: they are not part of the prefix, PT-SEP), the number of thinking blocks the request
held and the digest of the last of them (so a gap, or a block put back, shows), and the
digest of its full text. When the block comes back:

- **model check** (every model): a reader that cannot read the writer's blocks
  (:func:`polythink.reasoning.continuity.thinking_reading` says ``False``) drops it before
  the model reads it, never with an error (``model_binding_mismatch``);
- **prefix check** (models with ``thinking_binding``): the block's prefix must be what it
  was, and the blocks before it a suffix of those it followed. A failed block, and every
  later one, is refused with the API's 400 where the check is enforced (the field
  ``"error"``; else Fable and Mythos 5.2 always, Fable 5.1 and Opus 5.5 on new accounts),
  dropped with ``prefix_mismatch_behavior: "drop_block"`` (``prefix_binding_mismatch``), or
  let through (``thinking_mismatch_allowed``) on accounts that do not enforce it;
- a signature whose keyed digest does not match is the other 400, "Invalid `signature` in
  `thinking` block" without the sentence about the conversation, which ``drop_block`` does
  not cover.

Under the beta ``thinking-binding-controls-2026-08-01`` the answer lists what happened in
``input_transformations``. Signatures of the older form (``sim1.``, bound to the text only)
are still read, without the two checks.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from polythink.reasoning.capabilities import get_capability, normalise_model_name
from polythink.reasoning.continuity import thinking_reading
from polythink.simulator.prompt_cache import canonical, without_marks

__all__ = [
    "BETA_BINDING",
    "BETA_CLEAR_AT",
    "Prefixes",
    "Verdict",
    "bound_text",
    "check",
    "sign",
    "well_formed",
]

BETA_BINDING = "thinking-binding-controls-2026-08-01"
BETA_CLEAR_AT = "mid-conversation-system-clear-at-2026-08-21"

_SECRET = b"polythink-simulator-binding"
_PREFIX = "sim2."
_LEGACY = "sim1."
_THINKING = ("thinking", "redacted_thinking")


def _digest(data: bytes, size: int = 12) -> str:
    return hashlib.sha256(data).hexdigest()[:size]


class Prefixes:
    """The digests a block's prefix is compared by, for one request: ``system``, ``tools``
    and, for each message index ``i``, the rolling digest of the messages before it
    (:meth:`before`); thinking blocks and cache markers are left out."""

    def __init__(self, body: Mapping[str, Any], messages: Sequence[Any]) -> None:
        self.system = _digest(canonical(without_marks(body.get("system"))))
        self.tools = _digest(canonical(without_marks(body.get("tools"))))
        rolling = b""
        self._before = [""]
        for message in messages:
            rolling = hashlib.sha256(rolling + canonical(_prefix_part(message))).digest()
            self._before.append(rolling.hex()[:16])

    def before(self, index: int) -> str:
        """The digest of the messages before message ``index`` (all of them at ``len``)."""
        return self._before[index]


def _prefix_part(message: Any) -> Any:
    """What of a message is part of the prefix: all but its thinking blocks and markers."""
    if not isinstance(message, Mapping):
        return message
    content = message.get("content")
    if isinstance(content, list):
        content = [
            block
            for block in content
            if not (isinstance(block, Mapping) and block.get("type") in _THINKING)
        ]
    return without_marks({**message, "content": content})


@dataclass(frozen=True, slots=True)
class _Bound:
    model: str
    system: str
    tools: str
    prefix: str
    count: int
    last: str
    text: str


def sign(
    text: str, *, model: str, prefixes: Prefixes, index: int, count: int, last: str | None
) -> str:
    """The signature of a block with full text ``text`` written by ``model`` after the
    messages before ``index`` of a request with ``prefixes``, which held ``count`` thinking
    blocks, the last with signature ``last``."""
    fields = [
        normalise_model_name(model),
        prefixes.system,
        prefixes.tools,
        prefixes.before(index),
        str(count),
        _digest(last.encode(), 8) if last else "-",
        _digest(text.encode()),
    ]
    mac = _digest(_SECRET + "|".join(fields).encode())
    raw = ".".join([*fields, mac]).encode()
    return _PREFIX + base64.urlsafe_b64encode(raw).decode()


def _read(signature: str) -> _Bound | None:
    """The fields of a signature this simulator made, ``None`` when altered."""
    try:
        fields = base64.urlsafe_b64decode(signature[len(_PREFIX) :]).decode().split(".")
    except (ValueError, UnicodeDecodeError):
        return None
    if len(fields) != 8:
        return None
    *given, mac = fields
    if mac != _digest(_SECRET + "|".join(given).encode()):
        return None
    model, system, tools, prefix, count, last, text = given
    try:
        number = int(count)
    except ValueError:
        return None
    return _Bound(model, system, tools, prefix, number, last, text)


def well_formed(signature: str) -> bool:
    """Whether ``signature`` is one the simulator made (its keyed digest matches)."""
    return signature.startswith(_PREFIX) and _read(signature) is not None


def bound_text(signature: str, text: str) -> bool:
    """Whether ``signature`` is one the simulator made for a block with full text
    ``text``."""
    bound = _read(signature) if signature.startswith(_PREFIX) else None
    return bound is not None and bound.text == _digest(text.encode())


@dataclass
class Verdict:
    """What the simulated API does with a request's thinking blocks.

    Attributes:
        error: the 400 message when the request is refused, else ``None``.
        dropped: ``(message index, block index)`` of the blocks removed before the model
            reads them.
        transformations: the ``input_transformations`` entries, in request order.
        count: thinking blocks in the request; ``last``: the signature of the last one
            (a new block records both).
    """

    error: str | None = None
    dropped: set[tuple[int, int]] = field(default_factory=set)
    transformations: list[dict[str, Any]] = field(default_factory=list)
    count: int = 0
    last: str | None = None


_CHANGED = {
    "system": "The `system` prompt differs from the one the block was made with.",
    "tools": "The `tools` differ from those the block was made with.",
    "prefix": "An earlier message differs from the one the block was made with.",
    "chain": "A thinking block before it was removed, moved or put back.",
}
"""The sentence naming what changed, which the API "usually" adds (PT-SEP); the wording is
the simulator's own."""


def enforced(model: str, *, new_account: bool) -> bool:
    """Whether a failed prefix check is a 400 on ``model`` when the request sets no
    ``prefix_mismatch_behavior`` (CONTINUITY.md §1.3)."""
    cap = get_capability(model)
    binding = cap.thinking_binding if cap is not None else None
    return binding == "enforced" or (binding == "new_accounts" and new_account)


def check(
    body: Mapping[str, Any],
    messages: Sequence[Any],
    model: str,
    prefixes: Prefixes,
    *,
    beta: bool,
    new_account: bool,
) -> Verdict:
    """Check every thinking block of ``messages`` as the API does (see the module)."""
    verdict = Verdict()
    thinking = body.get("thinking")
    binding = thinking.get("block_binding") if isinstance(thinking, Mapping) else None
    behavior = binding.get("prefix_mismatch_behavior") if isinstance(binding, Mapping) else None
    cap = get_capability(model)
    checks_prefix = cap is not None and cap.thinking_binding is not None
    enforce = behavior == "error" or (behavior is None and enforced(model, new_account=new_account))
    failing: str | None = None
    previous: str | None = None
    seen = 0
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        content = message.get("content")
        for j, block in enumerate(content if isinstance(content, list) else ()):
            if not isinstance(block, Mapping) or block.get("type") not in _THINKING:
                continue
            signature = str(block.get("signature") or block.get("data") or "")
            position = seen
            seen += 1
            earlier, previous = previous, signature
            if not signature.startswith(_PREFIX):
                continue
            bound = _read(signature)
            if bound is None:
                continue
            path = f"messages.{i}.content.{j}"
            reading = thinking_reading(bound.model, model, provider="anthropic")
            if reading is not None and reading.reads is False:
                verdict.dropped.add((i, j))
                verdict.transformations.append(
                    {"type": "thinking_dropped", "path": path, "reason": "model_binding_mismatch"}
                )
                continue
            if not checks_prefix:
                continue
            if failing is None:
                failing = _changed(bound, prefixes, i, position, earlier)
            if failing is None:
                continue
            if behavior == "drop_block":
                verdict.dropped.add((i, j))
                verdict.transformations.append(
                    {"type": "thinking_dropped", "path": path, "reason": "prefix_binding_mismatch"}
                )
            elif enforce:
                verdict.error = (
                    f"{path}: Invalid `signature` in `thinking` block. The block is bound to a "
                    "different conversation. Remove the block, or set "
                    '`thinking.block_binding.prefix_mismatch_behavior` to "drop_block".'
                    + (
                        ""
                        if beta
                        else " That setting requires the `thinking-binding-controls-2026-08-01` "
                        "value in the `anthropic-beta` header."
                    )
                    + " "
                    + _CHANGED[failing]
                )
                return verdict
            else:
                verdict.transformations.append(
                    {
                        "type": "thinking_mismatch_allowed",
                        "path": path,
                        "reason": "prefix_binding_mismatch",
                    }
                )
    verdict.count = seen
    verdict.last = previous
    return verdict


def _changed(
    bound: _Bound, prefixes: Prefixes, index: int, position: int, earlier: str | None
) -> str | None:
    """What differs from what the block was made after, or ``None``: the blocks before it
    must be a suffix of those it followed (removing blocks from the start is allowed, a gap
    or a block put back is not)."""
    if bound.system != prefixes.system:
        return "system"
    if bound.tools != prefixes.tools:
        return "tools"
    if bound.prefix != prefixes.before(index):
        return "prefix"
    if position == 0:
        return None
    if position > bound.count or earlier is None or _digest(earlier.encode(), 8) != bound.last:
        return "chain"
    return None
