"""``polythink serve``: an HTTP gateway whose front doors speak the clients' formats.

Claude Code, Codex, Cursor, the official SDKs and curl call it as they call a provider: OpenAI
Chat Completions (``POST /v1/chat/completions``), OpenAI Responses (``POST /v1/responses``),
Anthropic Messages (``POST /v1/messages``, ``/v1/messages/count_tokens``) and
``GET /v1/models``. Each call runs through the same :class:`~polythink.Client` onion a library
call runs (reasoning translation, failover, retries, limits, budgets, cache, telemetry) on the
sources its ``model`` routes to (:mod:`.routing`). A body whose format is the source's wire
goes as written and comes back as the provider wrote it; any other is translated by the typed
core, its reasoning carried through the client in the format's own fields (:mod:`.envelope`).

Layout: one module per front door (:mod:`.chat`, :mod:`.responses`, :mod:`.messages`,
:mod:`.models`), each parsing its format into a :class:`~polythink.Request` and rendering
responses, streams and errors back; :mod:`.exchange` runs one call; :mod:`.routing` maps model
names to sources; :mod:`.tenancy` maps keys to tenants, their limits and budgets;
:mod:`.config` reads the TOML; :mod:`.app` is the aiohttp application; :mod:`.metrics` its
Prometheus metrics; :mod:`.fleet` runs several workers on one port under gunicorn.
Imported only by ``polythink serve`` (aiohttp comes with ``httpx-aiohttp``).
"""

from polythink.serve.app import GATEWAY, Gateway, create_app, run
from polythink.serve.config import GatewayConfig, RouteConfig, ServeSettings, load_config
from polythink.serve.tenancy import Tenant, hash_key

__all__ = [
    "GATEWAY",
    "Gateway",
    "GatewayConfig",
    "RouteConfig",
    "ServeSettings",
    "Tenant",
    "create_app",
    "hash_key",
    "load_config",
    "run",
]
