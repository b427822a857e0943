"""``GET /v1/models`` and ``GET /v1/models/{id}``: the routed model ids, in one body every
client reads.

Each entry carries OpenAI's fields (``id``, ``object: "model"``, ``created``, ``owned_by``)
and Anthropic's (``type: "model"``, ``display_name``, ``created_at``); the page has OpenAI's
``object: "list"`` and Anthropic's ``has_more``, ``first_id``, ``last_id``. Both SDKs keep
the fields they do not know (GATEWAY.md §2.4). Claude Code's discovery
(``?limit=1000``, a 3 s timeout, no redirect) gets it directly; it keeps the ids holding
``claude`` or ``anthropic``, so name routes for it that way.

Codex asks its own catalog with ``?client_version=``: the page then also has
``"models": []``. Codex's entries carry the system prompt it sends with each model, which
the gateway does not have, and an empty list keeps Codex on its bundled catalog; name the
route in Codex's ``model`` setting instead.

The listed ids are the configured routes and sources (``provider/model-id`` names are not
listed: they route on first use). One entry (``/v1/models/{id}``) is answered for any id
that routes, ``provider/model-id`` included, and 404 otherwise.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

__all__ = ["model_entry", "model_page"]


def model_entry(name: str, created: float) -> dict[str, Any]:
    """One model, in OpenAI's and Anthropic's shapes at once."""
    return {
        "id": name,
        "object": "model",
        "created": int(created),
        "owned_by": "polythink",
        "type": "model",
        "display_name": name,
        "created_at": datetime.fromtimestamp(int(created), UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def model_page(
    names: list[str], *, created: float | None = None, codex: bool = False
) -> dict[str, Any]:
    """The page of ``names`` (see the module docstring); ``codex`` adds ``"models": []``."""
    when = time.time() if created is None else created
    data = [model_entry(name, when) for name in names]
    page: dict[str, Any] = {
        "object": "list",
        "data": data,
        "has_more": False,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
    }
    if codex:
        page["models"] = []
    return page
