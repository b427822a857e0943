"""Who may call the gateway: virtual keys, each naming a tenant with its routes, limits and
budgets.

A tenant is a ``[[tenant]]`` table of the gateway's TOML file::

    [[tenant]]
    name = "acme"                     # the budgets' tag, the metrics' label
    key_env = "ACME_GATEWAY_KEY"      # the key in an environment variable, or
    # key_file = "/run/secrets/acme"  # in a file (its first line), or
    # key_sha256 = "sha256:9f86d0…"   # only its hash (`polythink serve --hash-key`)
    routes = ["smart", "fast"]        # the model ids it may call (default: every one)
    rpm = 60                          # requests per minute, across every worker
    tpm = 200000                      # tokens per minute (estimated, then corrected)
    max_concurrency = 8               # calls at once

    [[tenant.budget]]                 # a polythink Budget, tag = the tenant
    usd = 20.0
    per = "day"
    step_down_at = 0.8                # tiers step down before the money runs out

A key is never written in the file: the file holds its SHA-256 (``key_sha256``, one string or
a list, for rotation), or names where the key is (``key_env``, ``key_file``), which is read
once at start and kept only as its hash. A presented key is hashed and compared with every
known hash in constant time (:func:`hmac.compare_digest`, no early exit), so the time an
answer takes says nothing about how close a guess was. Keys are read from ``Authorization:
Bearer …`` (the OpenAI SDKs, ``ANTHROPIC_AUTH_TOKEN``), ``x-api-key`` (the Anthropic SDKs) or
``api-key``; they are never forwarded upstream (each source sends its own key), logged or
echoed.

A tenant's ``rpm``, ``tpm`` and ``max_concurrency`` are counted in the gateway's limit store
(the ``limits`` Redis server when it names one, so every worker shares them), under the hash
tag ``{polythink-tenant|<name>|none}``; a call over them is answered 429 with
``retry-after``. Its budgets are :class:`~polythink.Budget` s with ``tag=<name>`` added to
every route's client, and each of its calls carries that tag: the budgets step its tiers down
as they run low and refuse it (429 with ``retry-after``: the seconds until the window
resets, and ``x-should-retry: false``) when even the cheapest tier does not fit. Its calls
read and fill the cache in a namespace of their own (``Request.cache_namespace``): no tenant
is answered from an entry another filled.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polythink.budgets import Budget, check_tag
from polythink.errors import InvalidInputError

__all__ = [
    "KEY_HEADERS",
    "MIN_KEY_CHARS",
    "Admission",
    "KeyRing",
    "Tenant",
    "TenantLimited",
    "TenantLimits",
    "hash_key",
    "presented_key",
    "tenants_from_toml",
]

MIN_KEY_CHARS = 20
"""The shortest key the gateway accepts from an environment variable or a file."""

KEY_HEADERS = ("authorization", "x-api-key", "api-key")
"""Where a caller's key is read, in this order."""

_HASH = re.compile(r"(?:sha256:)?([0-9a-fA-F]{64})")
_KNOWN = frozenset(
    {"name", "key_sha256", "key_env", "key_file", "routes", "rpm", "tpm", "max_concurrency"}
)
_BUDGET_FIELDS = frozenset(Budget.__dataclass_fields__) - {"account", "model", "tier", "tag"}


def hash_key(key: str) -> str:
    """Return ``sha256:<64 hex digits>``, how the file names ``key``."""
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Tenant:
    """One tenant of the gateway (a ``[[tenant]]`` table).

    Attributes:
        name: the tenant's name: its budgets' tag, its cache namespace, its metrics label.
        digests: the SHA-256 digests (32 bytes each) of its keys.
        routes: the model ids (route names or aliases, or ``provider/model-id``) it may
            call; ``None``: every one.
        rpm, tpm, max_concurrency: its limits across the fleet (``None``: none).
        budgets: its spend budgets, each with ``tag=name``.
    """

    name: str
    digests: tuple[bytes, ...] = field(repr=False)
    routes: frozenset[str] | None = None
    rpm: float | None = None
    tpm: float | None = None
    max_concurrency: int | None = None
    budgets: tuple[Budget, ...] = ()

    @property
    def limited(self) -> bool:
        """Whether any of ``rpm``, ``tpm``, ``max_concurrency`` is set."""
        return bool(self.rpm or self.tpm or self.max_concurrency)

    def may_call(self, model: str) -> bool:
        """Whether the tenant may call the model id ``model``."""
        return self.routes is None or model in self.routes


class KeyRing:
    """The tenants' key digests; :meth:`find` names the tenant of a presented key."""

    def __init__(self, tenants: Sequence[Tenant]) -> None:
        self._entries = tuple((digest, tenant) for tenant in tenants for digest in tenant.digests)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def find(self, key: str) -> Tenant | None:
        """The tenant whose key ``key`` is, or ``None``.

        The key's digest is compared with every known digest, each comparison in constant
        time and none skipped once one matched.
        """
        digest = hashlib.sha256(key.encode()).digest()
        found = None
        for known, tenant in self._entries:
            if hmac.compare_digest(digest, known):
                found = tenant
        return found


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key a request presents (see :data:`KEY_HEADERS`): a bearer token's value, or the
    header's whole value; ``None`` when there is none."""
    for name in KEY_HEADERS:
        value = headers.get(name)
        if not value:
            continue
        if name == "authorization":
            scheme, _, token = value.strip().partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                return None
            return token.strip()
        return value.strip()
    return None


def _number(value: Any, where: str, *, integer: bool = False) -> Any:
    kind = int if integer else (int, float)
    if (
        isinstance(value, bool)
        or not isinstance(value, kind)
        or not math.isfinite(value)
        or value <= 0
    ):
        whole = "whole " if integer else ""
        raise InvalidInputError(f"{where} must be a positive {whole}number; got {value!r}")
    return value


def _digests(table: Mapping[str, Any], where: str, environ: Mapping[str, str]) -> list[bytes]:
    found: list[bytes] = []
    hashes = table.get("key_sha256")
    if hashes is not None:
        given = [hashes] if isinstance(hashes, str) else hashes
        if not isinstance(given, list) or not given:
            raise InvalidInputError(f"{where} key_sha256 must be a hash or a list of hashes")
        for text in given:
            match = _HASH.fullmatch(text.strip()) if isinstance(text, str) else None
            if match is None:
                raise InvalidInputError(
                    f"{where} key_sha256 must be sha256: and 64 hex digits "
                    "(polythink serve --hash-key prints it); got a value of another shape"
                )
            found.append(bytes.fromhex(match[1]))
    keys: list[tuple[str, str]] = []
    variable = table.get("key_env")
    if variable is not None:
        if not isinstance(variable, str) or not variable.strip():
            raise InvalidInputError(f"{where} key_env must name an environment variable")
        value = environ.get(variable.strip())
        if not value or not value.strip():
            raise InvalidInputError(
                f"{where}: the environment variable {variable.strip()} is not set"
            )
        keys.append((value.strip(), f"the environment variable {variable.strip()}"))
    path = table.get("key_file")
    if path is not None:
        if not isinstance(path, str) or not path.strip():
            raise InvalidInputError(f"{where} key_file must be a path")
        try:
            lines = Path(path).read_text().splitlines()
        except OSError as exc:
            raise InvalidInputError(
                f"{where}: cannot read key_file {path}: {exc.strerror}"
            ) from None
        keys.append((lines[0].strip() if lines else "", f"the file {path}"))
    for key, origin in keys:
        if len(key) < MIN_KEY_CHARS:
            raise InvalidInputError(
                f"{where}: the key in {origin} is shorter than {MIN_KEY_CHARS} characters "
                "(polythink serve --new-key makes one)"
            )
        found.append(hashlib.sha256(key.encode()).digest())
    if not found:
        raise InvalidInputError(
            f"{where}: a tenant needs a key: key_env (an environment variable), key_file, or "
            "key_sha256 (its hash)"
        )
    return found


def _budgets(tables: Any, name: str, where: str) -> tuple[Budget, ...]:
    if tables is None:
        return ()
    if not isinstance(tables, list):
        raise InvalidInputError(f"{where}: budgets are [[tenant.budget]] tables")
    budgets = []
    for i, table in enumerate(tables):
        at = f"{where} [[tenant.budget]] #{i}"
        unknown = sorted(set(table) - _BUDGET_FIELDS)
        if unknown:
            raise InvalidInputError(
                f"{at}: unknown keys {unknown}; known: {', '.join(sorted(_BUDGET_FIELDS))} (the "
                "scope is the tenant)"
            )
        try:
            budgets.append(Budget(**table, tag=name))
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"{at}: {exc}") from None
    return tuple(budgets)


def tenants_from_toml(
    tables: Any, where: str, environ: Mapping[str, str] | None = None
) -> tuple[Tenant, ...]:
    """Read the ``[[tenant]]`` tables of a gateway file (see the module docstring).

    Raises:
        ValueError: a table with an unknown key (a ``key`` written in the file among them),
            no key, a key variable unset, a key file unreadable, a key shorter than
            :data:`MIN_KEY_CHARS`, a hash of another shape, two tenants of one name or
            one key, a bad limit, or a budget :class:`~polythink.Budget` refuses.
    """
    if tables is None:
        return ()
    if not isinstance(tables, list):
        raise InvalidInputError(f"{where}: tenants are [[tenant]] tables")
    env = os.environ if environ is None else environ
    tenants: list[Tenant] = []
    owners: dict[bytes, str] = {}
    for i, table in enumerate(tables):
        at = f"{where} [[tenant]] #{i}"
        if "key" in table or "api_key" in table:
            raise InvalidInputError(
                f"{at}: a key is never written in the file; give key_env (an environment "
                "variable), key_file, or key_sha256 (polythink serve --hash-key prints it)"
            )
        unknown = sorted(set(table) - _KNOWN - {"budget"})
        if unknown:
            raise InvalidInputError(
                f"{at}: unknown keys {unknown}; known: {', '.join(sorted(_KNOWN))}"
            )
        try:
            name = check_tag(table.get("name"))
        except ValueError as exc:
            raise InvalidInputError(f"{at} name: {exc}") from None
        if name is None:
            raise InvalidInputError(f"{at}: a tenant needs a name")
        if any(t.name == name for t in tenants):
            raise InvalidInputError(f"{at}: a tenant named {name!r} is already configured")
        at = f"{where} [[tenant]] {name!r}"
        digests = _digests(table, at, env)
        for digest in digests:
            if digest in owners:
                raise InvalidInputError(f"{at}: its key is also tenant {owners[digest]!r}'s")
            owners[digest] = name
        routes = table.get("routes")
        if routes is not None and (
            not isinstance(routes, list)
            or not all(isinstance(r, str) and r.strip() for r in routes)
        ):
            raise InvalidInputError(f"{at} routes must be a list of model ids")
        limits = {
            key: _number(table[key], f"{at} {key}", integer=key == "max_concurrency")
            for key in ("rpm", "tpm", "max_concurrency")
            if key in table
        }
        tenants.append(
            Tenant(
                name=name,
                digests=tuple(digests),
                routes=frozenset(r.strip() for r in routes) if routes is not None else None,
                budgets=_budgets(table.get("budget"), name, at),
                **limits,
            )
        )
    return tuple(tenants)


class Admission:
    """A call a tenant's limits let through: what it took, given back by
    :meth:`TenantLimits.finish`."""

    __slots__ = ("backend", "estimate", "lease")

    def __init__(self, backend: Any, lease: Any, estimate: int) -> None:
        self.backend = backend
        self.lease = lease
        self.estimate = estimate


class TenantLimits:
    """Every tenant's ``rpm``, ``tpm`` and ``max_concurrency``, in the gateway's limit store.

    Args:
        store: the routes' limit store: a :class:`~polythink.backends.redis.RedisLimitStore`
            (shared by every worker naming the server) or a
            :class:`~polythink.backends.local.ProcessLimits`.
    """

    PROVIDER = "polythink-tenant"
    """The account name a tenant's buckets are kept under (``{polythink-tenant|<name>|none}``
    on Redis)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._backends: dict[str, Any] = {}

    def _backend(self, tenant: Tenant) -> Any:
        from polythink.backends.local import LocalLimits, MonotonicClock

        backend = self._backends.get(tenant.name)
        if backend is None:
            rpm, tpm, most = tenant.rpm, tenant.tpm, tenant.max_concurrency
            backend = self._backends[tenant.name] = self._store.for_source(
                self.PROVIDER,
                tenant.name,
                None,
                rpm=rpm,
                tpm=tpm,
                max_concurrency=most,
                fallback=LocalLimits(rpm, tpm, most, MonotonicClock()),
            )
        return backend

    async def admit(self, tenant: Tenant, estimate: int) -> Admission | None:
        """Take a slot, one request and ``estimate`` tokens of ``tenant``'s limits;
        ``None`` when it has none.

        Raises:
            TenantLimited: a limit has nothing left now (nothing was taken).
        """
        if not tenant.limited:
            return None
        backend = self._backend(tenant)
        lease, wait, reason = await backend.admit(estimate)
        if lease is None:
            raise TenantLimited(
                f"tenant {tenant.name!r} has {tenant.max_concurrency} calls under way, its "
                "max_concurrency",
                1.0,
            )
        if wait > 0:
            await lease.release()
            gate = {"rpm_limit": "requests", "tpm_limit": "tokens"}.get(reason, "calls")
            limit = tenant.rpm if gate == "requests" else tenant.tpm
            raise TenantLimited(
                f"tenant {tenant.name!r} is over its {gate} per minute ({limit:g}); try again "
                f"in {wait:.1f} s",
                wait,
            )
        return Admission(backend, lease, estimate)

    async def finish(self, admission: Admission | None, used: int | None) -> None:
        """Give back the slot and the tokens estimated beyond the ``used`` ones (``None``:
        unknown, the estimate stands)."""
        if admission is None:
            return
        refund = admission.estimate - used if used is not None else 0
        await admission.backend.finish(admission.lease, refund, None, None)


class TenantLimited(Exception):
    """A tenant's limit has nothing left: ``retry_after`` seconds until it has."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after
