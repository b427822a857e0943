"""Batches: many calls at batch prices, answered within the provider's window (24 hours).

``await client.batch(requests)`` submits requests built like any call (``client.request(...)``:
the same messages, tools, reasoning tiers, structured output) to one source's batch API and
returns a :class:`BatchJob`: poll it, await it, cancel it, save it and resume it in another
process, and read its results as typed :class:`~polythink.types.Response` s (or typed errors)
per request id, in the order submitted, priced at batch rates.

Each request goes through the same steps a call goes through before the wire: its reasoning
tier is resolved for the source's model (the source's
:class:`~polythink.middleware.reasoning.ReasoningMiddleware`), and its body is built by
the source's own transport (``batch_body``: the non-streamed body of ``complete()``); an
answer is parsed by the same transport (``parse_answer``), reconciled with the tier applied,
validated against its ``response_format``, and priced at batch prices
(:func:`polythink.pricing.price` with ``batch=True``). A service tier asked for a batch request
is not sent: a batch has its own (reported as ``batch``).

Spend budgets (:class:`~polythink.Budget`) reserve the batch's worst case at batch prices when
it is submitted (each request's prompt estimate and output ceiling, as for a call), all or
nothing, and are corrected request by request as results are read: the batch's cost where a
request ran, nothing where it was refused, expired or was cancelled. A batch is counted in the
budget window it was submitted in: a result read once that window is over corrects nothing.
Each answer is counted in the client's call and cost metrics as it is read (served tier
``batch``), so a dashboard's cost per service tier includes batches.

The three batch APIs (``ProviderProfile.batches``; read 2026-12-04):

- ``openai`` (OpenAI Batch API: openai-python 3.63.0 ``types/batch.py``,
  ``batch_create_params.py``; developers.openai.com/api/docs/guides/batch): a JSONL file of
  ``{"custom_id", "method": "POST", "url": "/v1/chat/completions" | "/v1/responses", "body"}``
  lines uploaded to ``POST /files`` (``purpose=batch``), then ``POST /batches``
  (``completion_window: "24h"``), ``GET /batches/{id}``, ``POST /batches/{id}/cancel``;
  results are JSONL lines ``{"id", "custom_id", "response": {"status_code", "request_id",
  "body"}, "error"}`` in ``output_file_id`` and ``error_file_id`` (``GET /files/{id}/content``);
  an ``error`` with code ``batch_expired`` / ``batch_cancelled`` is a request never run. Status
  ``validating | failed | in_progress | finalizing | completed | expired | cancelling |
  cancelled``; at most 50,000 requests.
- ``anthropic`` (Message Batches: anthropic-sdk-python 2.17.0 ``types/messages/
  message_batch.py``, ``batch_create_params.py``, ``message_batch_individual_response.py``):
  ``POST /messages/batches`` with ``{"requests": [{"custom_id", "params"}]}``, ``GET`` and
  ``POST .../cancel``; ``processing_status`` ``in_progress | canceling | ended``; results are
  JSONL at ``results_url``, each ``{"custom_id", "result": {"type": "succeeded", "message"} |
  {"type": "errored", "error"} | {"type": "canceled"} | {"type": "expired"}}``; ids match
  ``^[a-zA-Z0-9_-]{1,64}$``; at most 100,000 requests. Preserved thinking differs in a batch
  (CONTINUITY.md §1.3): a request that leaves ``thinking.block_binding.prefix_mismatch_behavior``
  unset is not refused for a thinking block bound to another conversation, the API drops the
  blocks instead; one that sets ``"error"`` ends ``errored`` (a typed
  :class:`~polythink.errors.RequestRejectedError` here), where a call would get the 400.
- ``gemini`` (Gemini API batch mode: google-genai 3.6.1 ``batches.py``,
  ``_BatchJobSource_to_mldev`` / ``_BatchJob_from_mldev``): ``POST
  models/{model}:batchGenerateContent`` with ``{"batch": {"displayName", "inputConfig":
  {"requests": {"requests": [{"request", "metadata": {"key"}}]}}}}``, ``GET batches/{id}``,
  ``POST batches/{id}:cancel``; ``metadata.state`` ``BATCH_STATE_PENDING | RUNNING | SUCCEEDED
  | FAILED | CANCELLED | EXPIRED``; results inlined in ``metadata.output.inlinedResponses
  .inlinedResponses``, each ``{"response"} | {"error"}`` with the request's ``metadata``.

OpenRouter's batch API is not this shape (requests inline, ``/api/beta/batches``, one
``endpoint`` and ``model`` per batch, reported unreachable in 2026-08: tobert/kaibo#123,
mycelia-tech/mycelia#98), so an ``openrouter`` source has no batches.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import anyio

from polythink.budgets import nanos
from polythink.errors import (
    BatchItemNotRunError,
    InvalidInputError,
    OutputValidationError,
    PolythinkError,
    RequestTimeoutError,
    TransientError,
)
from polythink.pricing import price, tier_price_note
from polythink.structured import parse_output
from polythink.transports.error_map import error_from_status
from polythink.types import (
    Effort,
    Message,
    MessageMetadata,
    Request,
    Resolution,
    Response,
    ResponseFormat,
    check_text,
)
from polythink.wire_json import loads_json

if TYPE_CHECKING:
    from polythink.config import Source
    from polythink.middleware.budget import BatchHold, BudgetMiddleware
    from polythink.middleware.reasoning import ReasoningMiddleware
    from polythink.middleware.telemetry import TelemetryMiddleware
    from polythink.transports.base import HTTPTransport

__all__ = [
    "BATCH_STATES",
    "BatchJob",
    "BatchStatus",
    "resume_batch",
    "submit_batch",
]


class _BatchClient(Protocol):
    """What a batch uses of the :class:`~polythink.Client` it goes through: the client's
    sources, each source's transport, reasoning layer and budget layer, and its telemetry.

    A ``Client`` is one; naming this much rather than the class keeps this module from
    importing ``client.py``, which imports it for :meth:`polythink.Client.batch`.
    """

    @property
    def sources(self) -> Sequence[Source]: ...

    @property
    def _telemetry(self) -> TelemetryMiddleware: ...

    def _source_parts(
        self, index: int
    ) -> tuple[HTTPTransport, ReasoningMiddleware, BudgetMiddleware | None]: ...


BATCH_STATES: tuple[str, ...] = (
    "validating",
    "pending",
    "in_progress",
    "finalizing",
    "cancelling",
    "completed",
    "failed",
    "expired",
    "cancelled",
)
"""A batch's state in polythink's words (the provider's own is :attr:`BatchStatus.provider_state`);
the last four are final."""
_FINAL = frozenset({"completed", "failed", "expired", "cancelled"})
_CUSTOM_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_LIMITS = {"openai": 50_000, "anthropic": 100_000, "gemini": 50_000}
"""Most requests in one batch (OpenAI and Anthropic: their docs; Gemini's inline limit is by
size, 20 MB, not checked here)."""
_FORMAT_VERSION = 1
_RESULT_CHUNK = 256
"""Results parsed between two checkpoints of the event loop."""


@dataclass(frozen=True, slots=True)
class BatchStatus:
    """Where a batch stands.

    Attributes:
        state: one of :data:`BATCH_STATES` (``completed``, ``failed``, ``expired`` and
            ``cancelled`` are final; an expired or cancelled batch still has the results of
            the requests that ran).
        done: whether the state is final (results can be read).
        provider_state: the state as the provider reported it (``in_progress``,
            ``ended``, ``BATCH_STATE_RUNNING`` …).
        total: requests in the batch.
        succeeded, failed, expired, cancelled: requests in each outcome, where the provider
            reports them (``None``: not reported; OpenAI counts ``completed`` and ``failed``
            only, Anthropic all four once it ends).
        errors: why the batch failed as a whole (OpenAI's ``errors.data`` messages).
    """

    state: str
    done: bool
    provider_state: str
    total: int
    succeeded: int | None = None
    failed: int | None = None
    expired: int | None = None
    cancelled: int | None = None
    errors: tuple[str, ...] = ()


# ---------------------------------------------------------------- the providers' batch APIs


Outcome = tuple[str, int | None, Any]
"""One request's outcome: (``ok``, status, answer body) | (``error``, status, error body) |
(``expired`` | ``cancelled`` | ``failed``, None, message)."""


class _Wire:
    """One provider's batch API over a source's transport (its URL, credentials, headers)."""

    def __init__(self, transport: HTTPTransport, record: Mapping[str, Any]) -> None:
        self.transport = transport
        self.root = transport.source.endpoint
        self.record = record

    async def _json(self, method: str, url: str, body: Any = None) -> Any:
        content, _ = await self.transport.exchange(method, url, json_body=body)
        return _loads(content, self.transport)

    async def submit(self, lines: list[tuple[str, dict[str, Any]]], name: str) -> Any:
        raise NotImplementedError

    async def get(self, batch_id: str) -> Any:
        raise NotImplementedError

    async def cancel(self, batch_id: str) -> Any:
        raise NotImplementedError

    def status(self, raw: Any, total: int) -> BatchStatus:
        raise NotImplementedError

    def batch_id(self, raw: Any) -> str:
        raise NotImplementedError

    async def outcomes(self, raw: Any) -> dict[str, Outcome]:
        raise NotImplementedError


class _OpenAIWire(_Wire):
    """OpenAI's Batch API: a JSONL file, then a batch over it (see the module docstring)."""

    @property
    def path(self) -> str:
        return str(self.record["endpoint_path"])

    async def submit(self, lines: list[tuple[str, dict[str, Any]]], name: str) -> Any:
        data = b"".join(
            json.dumps(
                {"custom_id": cid, "method": "POST", "url": self.path, "body": body},
                separators=(",", ":"),
                ensure_ascii=False,
            ).encode()
            + b"\n"
            for cid, body in lines
        )
        content, _ = await self.transport.exchange(
            "POST",
            f"{self.root}/files",
            files={"file": (f"{name}.jsonl", data, "application/jsonl")},
            data={"purpose": "batch"},
        )
        uploaded = _loads(content, self.transport)
        return await self._json(
            "POST",
            f"{self.root}/batches",
            {
                "input_file_id": uploaded["id"],
                "endpoint": self.path,
                "completion_window": "24h",
                "metadata": {"name": name},
            },
        )

    async def get(self, batch_id: str) -> Any:
        return await self._json("GET", f"{self.root}/batches/{batch_id}")

    async def cancel(self, batch_id: str) -> Any:
        return await self._json("POST", f"{self.root}/batches/{batch_id}/cancel")

    def batch_id(self, raw: Any) -> str:
        return str(raw["id"])

    def status(self, raw: Any, total: int) -> BatchStatus:
        state = str(raw.get("status"))
        counts = raw.get("request_counts") or {}
        errors = raw.get("errors") or {}
        messages = tuple(
            str(e.get("message") or e.get("code"))
            for e in (errors.get("data") or ())
            if isinstance(e, Mapping)
        )
        return BatchStatus(
            state=state if state in BATCH_STATES else "in_progress",
            done=state in _FINAL,
            provider_state=state,
            total=int(counts.get("total") or total),
            succeeded=counts.get("completed"),
            failed=counts.get("failed"),
            errors=messages,
        )

    async def outcomes(self, raw: Any) -> dict[str, Outcome]:
        found: dict[str, Outcome] = {}
        for key in ("output_file_id", "error_file_id"):
            file_id = raw.get(key)
            if not file_id:
                continue
            content, _ = await self.transport.exchange(
                "GET", f"{self.root}/files/{file_id}/content"
            )
            for line in _jsonl(content, self.transport):
                cid = str(line.get("custom_id"))
                error = line.get("error")
                answer = line.get("response")
                if isinstance(error, Mapping):
                    code = str(error.get("code") or "")
                    kind = {"batch_expired": "expired", "batch_cancelled": "cancelled"}.get(code)
                    if kind is not None:
                        found[cid] = (kind, None, str(error.get("message") or code))
                        continue
                    found[cid] = ("error", None, {"error": dict(error)})
                elif isinstance(answer, Mapping):
                    status = int(answer.get("status_code") or 0)
                    body = answer.get("body")
                    found[cid] = ("ok" if 200 <= status < 300 else "error", status, body)
        return found


class _AnthropicWire(_Wire):
    """Anthropic's Message Batches (see the module docstring)."""

    async def submit(self, lines: list[tuple[str, dict[str, Any]]], name: str) -> Any:
        requests = [{"custom_id": cid, "params": body} for cid, body in lines]
        return await self._json("POST", f"{self.root}/messages/batches", {"requests": requests})

    async def get(self, batch_id: str) -> Any:
        return await self._json("GET", f"{self.root}/messages/batches/{batch_id}")

    async def cancel(self, batch_id: str) -> Any:
        return await self._json("POST", f"{self.root}/messages/batches/{batch_id}/cancel")

    def batch_id(self, raw: Any) -> str:
        return str(raw["id"])

    def status(self, raw: Any, total: int) -> BatchStatus:
        state = str(raw.get("processing_status"))
        counts = raw.get("request_counts") or {}
        ended = state == "ended"
        if not ended:
            ours = "cancelling" if state == "canceling" else "in_progress"
        elif raw.get("cancel_initiated_at"):
            ours = "cancelled"
        elif counts.get("expired"):
            ours = "expired"
        else:
            ours = "completed"
        return BatchStatus(
            state=ours,
            done=ended,
            provider_state=state,
            total=total,
            succeeded=counts.get("succeeded") if ended else None,
            failed=counts.get("errored") if ended else None,
            expired=counts.get("expired") if ended else None,
            cancelled=counts.get("canceled") if ended else None,
        )

    async def outcomes(self, raw: Any) -> dict[str, Outcome]:
        url = raw.get("results_url")
        if not url:
            return {}
        url = str(url)
        if not url.startswith(("http://", "https://")):
            url = f"{self.root}/{url.lstrip('/').removeprefix('v1/')}"
        if urlsplit(url).netloc != urlsplit(self.root).netloc:
            # The key goes only where the source's own calls go.
            raise TransientError(
                f"anthropic's results_url points to another host ({urlsplit(url).netloc}) than "
                "the source's endpoint: not fetched with the source's key",
                provider=self.transport.profile.id,
                source_index=self.transport.index,
                error_type="results_url_elsewhere",
                should_retry=False,
            )
        content, _ = await self.transport.exchange("GET", url)
        found: dict[str, Outcome] = {}
        for line in _jsonl(content, self.transport):
            cid = str(line.get("custom_id"))
            result = line.get("result") or {}
            kind = result.get("type")
            if kind == "succeeded":
                found[cid] = ("ok", 200, result.get("message"))
            elif kind == "errored":
                found[cid] = ("error", None, result.get("error"))
            elif kind == "canceled":
                found[cid] = ("cancelled", None, "the batch was cancelled before it ran")
            elif kind == "expired":
                found[cid] = ("expired", None, "the batch expired before it ran")
        return found


_GEMINI_STATES = {
    "BATCH_STATE_PENDING": "pending",
    "BATCH_STATE_RUNNING": "in_progress",
    "BATCH_STATE_SUCCEEDED": "completed",
    "BATCH_STATE_FAILED": "failed",
    "BATCH_STATE_CANCELLED": "cancelled",
    "BATCH_STATE_EXPIRED": "expired",
}


class _GeminiWire(_Wire):
    """The Gemini API's batch mode with inlined requests (see the module docstring)."""

    async def submit(self, lines: list[tuple[str, dict[str, Any]]], name: str) -> Any:
        model = self.transport.source.model
        requests = [{"request": body, "metadata": {"key": cid}} for cid, body in lines]
        batch = {"displayName": name, "inputConfig": {"requests": {"requests": requests}}}
        return await self._json(
            "POST", f"{self.root}/models/{model}:batchGenerateContent", {"batch": batch}
        )

    async def get(self, batch_id: str) -> Any:
        return await self._json("GET", f"{self.root}/{batch_id}")

    async def cancel(self, batch_id: str) -> Any:
        await self._json("POST", f"{self.root}/{batch_id}:cancel")
        return await self.get(batch_id)

    def batch_id(self, raw: Any) -> str:
        return str(raw["name"])

    def status(self, raw: Any, total: int) -> BatchStatus:
        metadata = raw.get("metadata") or {}
        state = str(metadata.get("state") or "BATCH_STATE_PENDING")
        ours = _GEMINI_STATES.get(state, "in_progress")
        stats = metadata.get("batchStats") or {}
        ok, bad = stats.get("successfulRequestCount"), stats.get("failedRequestCount")
        return BatchStatus(
            state=ours,
            done=ours in _FINAL,
            provider_state=state,
            total=int(stats.get("requestCount") or total),
            succeeded=int(ok) if ok is not None else None,
            failed=int(bad) if bad is not None else None,
        )

    async def outcomes(self, raw: Any) -> dict[str, Outcome]:
        metadata = raw.get("metadata") or {}
        output = metadata.get("output") or raw.get("response") or {}
        inlined = (output.get("inlinedResponses") or {}).get("inlinedResponses") or []
        found: dict[str, Outcome] = {}
        for entry in inlined:
            key = (entry.get("metadata") or {}).get("key")
            if key is None:
                continue
            if isinstance(entry.get("error"), Mapping):
                found[str(key)] = ("error", entry["error"].get("code"), {"error": entry["error"]})
            else:
                found[str(key)] = ("ok", 200, entry.get("response"))
        return found


_WIRES: dict[str, type[_Wire]] = {
    "openai": _OpenAIWire,
    "anthropic": _AnthropicWire,
    "gemini": _GeminiWire,
}


def _loads(content: bytes, transport: HTTPTransport) -> Any:
    try:
        return loads_json(content)
    except ValueError:
        raise TransientError(
            f"{transport.profile.id} answered a batch request with a body that is not JSON",
            provider=transport.profile.id,
            source_index=transport.index,
            error_type="malformed_body",
        ) from None


def _jsonl(content: bytes, transport: HTTPTransport) -> list[Mapping[str, Any]]:
    lines = []
    for raw in content.splitlines():
        if raw.strip():
            line = _loads(raw, transport)
            if isinstance(line, Mapping):
                lines.append(line)
    return lines


# ---------------------------------------------------------------- response formats, saved


def _format_json(fmt: ResponseFormat[Any] | None) -> dict[str, Any] | None:
    if fmt is None:
        return None
    kind = fmt.output_type
    return {
        "kind": fmt.kind,
        "schema": dict(fmt.schema) if fmt.schema is not None else None,
        "name": fmt.name,
        "description": fmt.description,
        "strict": fmt.strict,
        "class": f"{kind.__module__}:{kind.__qualname__}" if kind is not None else None,
    }


def _format_from(data: Mapping[str, Any] | None) -> ResponseFormat[Any] | None:
    """A saved format back: its model class when it can be imported, else its schema.

    Raises:
        ValueError: the saved class cannot be imported (pass ``response_format=`` to
            :func:`resume_batch` to name it).
    """
    if data is None:
        return None
    options = {"name": data["name"], "description": data["description"], "strict": data["strict"]}
    ref = data.get("class")
    if ref:
        module, _, qualname = str(ref).partition(":")
        try:
            found: Any = __import__(module, fromlist=["_"])
            for part in qualname.split("."):
                found = getattr(found, part)
        except (ImportError, AttributeError):
            raise InvalidInputError(
                f"the batch's response_format class {ref} cannot be imported here; pass "
                "response_format= to resume_batch to parse its answers"
            ) from None
        return ResponseFormat(found, **options)
    if data["kind"] == "json_object":
        return ResponseFormat({"type": "json_object"})
    return ResponseFormat(data["schema"], **options)


# ---------------------------------------------------------------- the job


@dataclass(slots=True)
class _Item:
    """What reading one request's answer needs: its tiers, notes and parse hints, its
    format, its worst case and where that is held."""

    custom_id: str
    requested: Effort | None
    applied: Effort | None
    warnings: tuple[str, ...]
    notes: list[str]
    overridden: list[str]
    hints: dict[str, Any]
    format: ResponseFormat[Any] | None
    worst: int
    hold: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.custom_id,
            "requested": self.requested.value if self.requested is not None else None,
            "applied": self.applied.value if self.applied is not None else None,
            "warnings": list(self.warnings),
            "notes": self.notes,
            "overridden": self.overridden,
            "hints": self.hints,
            "format": _format_json(self.format),
            "worst": self.worst,
            "hold": self.hold,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], fmt: ResponseFormat[Any] | None) -> _Item:
        return cls(
            custom_id=str(data["id"]),
            requested=Effort.parse(data["requested"]),
            applied=Effort.parse(data["applied"]),
            warnings=tuple(data["warnings"]),
            notes=list(data["notes"]),
            overridden=list(data["overridden"]),
            hints=dict(data["hints"]),
            format=fmt if fmt is not None else _format_from(data["format"]),
            worst=int(data["worst"]),
            hold=data["hold"],
        )


class BatchJob:
    """A submitted batch: poll it, await it, cancel it, save it, read its results.

    Built by :meth:`polythink.Client.batch` (or :meth:`polythink.Client.resume_batch` from a
    saved job). It talks to the provider through its client's source (its endpoint,
    credentials and HTTP client), so the client must be open while the job is used.

    Attributes:
        id: the provider's batch id (``batch_…``, ``msgbatch_…``, ``batches/…``).
        provider: the source's provider id.
        model: the source's model.
        source_index: the source's position in the client.
        custom_ids: the requests' ids, in the order submitted (and results are read).
        submitted_at: when the batch was submitted (Unix seconds).
    """

    def __init__(
        self,
        client: _BatchClient,
        source_index: int,
        record: dict[str, Any],
        items: list[_Item],
        holds: list[BatchHold],
    ) -> None:
        self._client = client
        self.source_index = source_index
        self._record = record
        self._items = items
        self._holds = holds
        self._settled: set[str] = set(record.get("settled", ()))
        self._raw: Any = None
        self.id: str = record["id"]
        self.provider: str = record["provider"]
        self.model: str = record["model"]
        self.submitted_at: float = record["submitted_at"]
        self.custom_ids: tuple[str, ...] = tuple(item.custom_id for item in items)

    def __repr__(self) -> str:
        return (
            f"<BatchJob {self.id} {self.provider}/{self.model} requests={len(self._items)} "
            f"state={self._record.get('state', 'submitted')}>"
        )

    def _wire(self) -> _Wire:
        transport = self._client._source_parts(self.source_index)[0]
        return _WIRES[self._record["wire"]](transport, self._record)

    async def poll(self) -> BatchStatus:
        """Ask the provider where the batch stands (one request).

        Raises:
            PolythinkError: the provider's answer mapped, as for a call.
        """
        wire = self._wire()
        self._raw = await wire.get(self.id)
        status = wire.status(self._raw, len(self._items))
        self._record["state"] = status.state
        return status

    async def wait(self, *, every: float = 30.0, timeout: float | None = None) -> BatchStatus:
        """Poll every ``every`` seconds until the batch is done; return its final status.

        Raises:
            RequestTimeoutError: ``timeout`` seconds passed first (``error_type``
                ``"deadline"``); the batch goes on, poll or wait again.
            PolythinkError: a poll's error, as :meth:`poll`.
        """
        if not every > 0:
            raise InvalidInputError(f"every must be a positive number of seconds; got {every!r}")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            status = await self.poll()
            if status.done:
                return status
            if deadline is not None and time.monotonic() + every > deadline:
                raise RequestTimeoutError(
                    f"batch {self.id} is still {status.state} after {timeout:g} s of waiting",
                    provider=self.provider,
                    source_index=self.source_index,
                    error_type="deadline",
                )
            await anyio.sleep(every)

    async def cancel(self) -> BatchStatus:
        """Ask the provider to cancel the batch; requests already run keep their results,
        the others end as :class:`~polythink.errors.BatchItemNotRunError` (``cancelled``).

        Raises:
            PolythinkError: the provider's answer mapped, as for a call.
        """
        wire = self._wire()
        self._raw = await wire.cancel(self.id)
        status = wire.status(self._raw, len(self._items))
        self._record["state"] = status.state
        return status

    async def results(
        self, *, every: float = 30.0, timeout: float | None = None
    ) -> AsyncIterator[tuple[str, Response[Any] | PolythinkError]]:
        """Yield ``(custom_id, result)`` for every request, in the order submitted, once the
        batch is done (waiting for it as :meth:`wait` does).

        A result is a :class:`~polythink.types.Response` (``service_tier`` ``"batch"``,
        ``cost`` at batch prices, ``parsed`` for a ``response_format``) or the typed error of
        that request: the provider's refusal mapped as for a call, an
        :class:`~polythink.errors.OutputValidationError`, or a
        :class:`~polythink.errors.BatchItemNotRunError` for a request that never ran. Each
        request's budget reservation is corrected as its result is yielded (once per job,
        also across :meth:`save` and resume).

        Raises:
            PolythinkError: polling or downloading the results failed (nothing is yielded).
        """
        status = await self.wait(every=every, timeout=timeout)
        wire = self._wire()
        outcomes = await wire.outcomes(self._raw)
        reason = {"failed": "failed", "expired": "expired", "cancelled": "cancelled"}.get(
            status.state, "failed"
        )
        why = "; ".join(status.errors) or f"the batch ended {status.state} before it ran"
        transport = self._client._source_parts(self.source_index)[0]
        ended = time.time()
        for n, item in enumerate(self._items):
            outcome = outcomes.get(item.custom_id, (reason, None, why))
            result = self._result(transport, item, outcome, ended)
            await self._settle(item, result)
            yield item.custom_id, result
            if n % _RESULT_CHUNK == _RESULT_CHUNK - 1:
                await anyio.lowlevel.checkpoint()

    async def collect(
        self, *, every: float = 30.0, timeout: float | None = None
    ) -> dict[str, Response[Any] | PolythinkError]:
        """Every result by request id, in the order submitted (see :meth:`results`)."""
        return {cid: result async for cid, result in self.results(every=every, timeout=timeout)}

    def _result(
        self, transport: HTTPTransport, item: _Item, outcome: Outcome, ended: float
    ) -> Response[Any] | PolythinkError:
        kind, status, data = outcome
        if kind in ("expired", "cancelled", "failed"):
            return BatchItemNotRunError(
                f"batch {self.id} request {item.custom_id!r} never ran: {data}",
                reason=kind,
                custom_id=item.custom_id,
                provider=self.provider,
                source_index=self.source_index,
                error_type=f"batch_{kind}",
            )
        if kind == "error":
            return self._error(transport, status, data)
        try:
            response = transport.parse_answer(data, item.hints, list(item.notes))
        except PolythinkError as exc:
            return exc
        reasoning = self._client._source_parts(self.source_index)[1]
        resolution = Resolution(item.requested, item.applied, {}, None, item.warnings)
        response = reasoning.finish(response, resolution, item.overridden)
        cost = price(response.usage, self.provider, response.model, batch=True)
        if cost is None and response.model != self.model:
            cost = price(response.usage, self.provider, self.model, batch=True)
        warnings = list(response.warnings)
        note = tier_price_note(self.provider, self.model, None, batch=True)
        if note is not None:
            warnings.append(note)
        metadata = MessageMetadata(
            provider=response.provider,
            model=response.model,
            source_index=self.source_index,
            started_at=self.submitted_at,
            duration=max(0.0, ended - self.submitted_at),
        )
        message = _with_metadata(response.message, metadata)
        response = response.with_(
            cost=cost, service_tier="batch", warnings=warnings, message=message
        )
        self._client._telemetry.count_result(response)
        if item.format is not None:
            try:
                return parse_output(response, item.format)
            except PolythinkError as exc:
                return exc
        return response

    def _error(self, transport: HTTPTransport, status: int | None, data: Any) -> PolythinkError:
        if status is not None and status >= 300:
            content = json.dumps(data if data is not None else {}).encode()
            error = error_from_status(
                status,
                {},
                content,
                provider=self.provider,
                source_index=self.source_index,
                secrets=transport.secrets(),
            )
            return transport.about_model(error)
        return transport.in_band_error(data if data is not None else {})

    async def _settle(self, item: _Item, result: Response[Any] | PolythinkError) -> None:
        if item.hold is None or item.custom_id in self._settled:
            return
        layer = self._client._source_parts(self.source_index)[2]
        if layer is None:
            return
        self._settled.add(item.custom_id)
        # An answer that did not fit its format ran all the same, and is billed.
        response = result.response if isinstance(result, OutputValidationError) else result
        charge = 0
        if isinstance(response, Response):
            # Ran but cannot be priced: what was reserved stays counted.
            charge = nanos(response.cost.total) if response.cost is not None else item.worst
        await layer.release_batch(self._holds[item.hold], item.worst, charge)

    def to_dict(self) -> dict[str, Any]:
        """The job as plain JSON values: what :func:`resume_batch` needs in another process
        (ids, tiers, parse hints, budget holds; never a credential)."""
        return {
            **self._record,
            "items": [item.to_json() for item in self._items],
            "holds": [hold.to_json() for hold in self._holds],
            "settled": sorted(self._settled),
        }

    def save(self, path: str | Path) -> Path:
        """Write :meth:`to_dict` to ``path`` as JSON (atomically: a temporary file in the
        same directory, then renamed), readable by the user only; return the path."""
        target = Path(path)
        fd, tmp = tempfile.mkstemp(prefix=".batch-", suffix=".json", dir=target.parent or ".")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(self.to_dict(), handle, ensure_ascii=False, separators=(",", ":"))
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target


def _with_metadata(message: Message, metadata: MessageMetadata) -> Message:
    import dataclasses

    return dataclasses.replace(message, metadata=metadata)


# ---------------------------------------------------------------- submit and resume


_NAME_CHARS = 512
"""The longest batch name: OpenAI's limit on a ``metadata`` value (512 characters,
https://platform.openai.com/docs/api-reference/batch/create, read 2026-12-04)."""


def _check_name(name: object) -> None:
    if name is None:
        return
    if not isinstance(name, str) or not name.strip():
        raise InvalidInputError(
            f"batch name must be a non-empty str (or None for polythink-<unix time>); got "
            f"{type(name).__name__} {name!r}"
        )
    if len(name) > _NAME_CHARS:
        raise InvalidInputError(
            f"batch name must be at most {_NAME_CHARS} characters (OpenAI's metadata value "
            f"limit); got {len(name)}"
        )
    check_text(name, "batch name")


def _custom_ids(requests: Mapping[str, Request] | Sequence[Request]) -> list[tuple[str, Request]]:
    if isinstance(requests, Mapping):
        for key in requests:
            if not isinstance(key, str):
                raise InvalidInputError(
                    f"batch request id {key!r} is a {type(key).__name__}: ids are str, 1 to 64 "
                    "letters, digits, '_' or '-' (or pass a list for ids '0', '1', ...)"
                )
        pairs = list(requests.items())
        for cid, _ in pairs:
            if not _CUSTOM_ID.fullmatch(cid):
                raise InvalidInputError(
                    f"batch request id {cid!r}: an id is 1 to 64 letters, digits, '_' or '-' "
                    "(Anthropic's custom_id pattern, the strictest of the batch APIs)"
                )
    elif isinstance(requests, Sequence) and not isinstance(requests, str | bytes):
        pairs = [(str(i), r) for i, r in enumerate(requests)]
    else:
        raise InvalidInputError(
            "requests must be a list of Request (from client.request(...)) or a dict of id -> "
            f"Request; got {type(requests).__name__}"
        )
    if not pairs:
        raise InvalidInputError("a batch needs at least one request")
    for cid, request in pairs:
        if not isinstance(request, Request):
            raise InvalidInputError(
                f"batch request {cid!r} is a {type(request).__name__}: build each with "
                "client.request(messages, ...), which takes complete()'s arguments"
            )
    return pairs


async def submit_batch(
    client: _BatchClient,
    source_index: int,
    requests: Mapping[str, Request] | Sequence[Request],
    *,
    name: str | None = None,
) -> BatchJob:
    """Submit ``requests`` as one batch to the client's source ``source_index`` (see
    :meth:`polythink.Client.batch`).

    Raises:
        ValueError: malformed requests, duplicate or malformed ids (an id that is not a
            ``str``), a ``name`` that is not a non-empty ``str`` of at most 512 characters
            of valid Unicode, more requests than the provider takes, or a source whose
            provider has no batch API.
        PolythinkError: a request this source cannot take (a reasoning tier, a format, a
            content part: named by its id, nothing submitted), a budget that cannot afford
            the batch (:class:`~polythink.errors.BudgetExceededError`), or the provider's
            refusal of the batch.
    """
    _check_name(name)
    transport, reasoning, budget = client._source_parts(source_index)
    profile = transport.profile
    wire_kind = profile.batches
    if wire_kind is None:
        raise InvalidInputError(
            f"provider {profile.id!r} has no batch API polythink speaks (sources of openai, "
            "openai-responses, anthropic or gemini have one)"
        )
    pairs = _custom_ids(requests)
    limit = _LIMITS[wire_kind]
    if len(pairs) > limit:
        raise InvalidInputError(
            f"a {profile.id} batch takes at most {limit:,} requests; got {len(pairs):,}"
        )
    lines: list[tuple[str, dict[str, Any]]] = []
    items: list[_Item] = []
    worsts: list[tuple[Request, int | None]] = []
    for cid, request in pairs:
        notes: list[str] = []
        if request.service_tier is not None or request.tier_resolution is not None:
            notes.append(
                f"service_tier={request.service_tier!s} was not sent: a batch request is "
                "served at the batch tier"
            )
            request = request.with_(service_tier=None, tier_resolution=None)
        try:
            prepared = reasoning.prepare(request)
            body, transport_notes, hints = transport.batch_body(prepared)
        except PolythinkError as exc:
            exc.message = f"batch request {cid!r}: {exc.message}"
            exc.args = (exc.message,)
            raise
        resolution = prepared.resolution
        assert resolution is not None
        lines.append((cid, body))
        worst = budget.batch_worst(request) if budget is not None else None
        worsts.append((request, worst))
        items.append(
            _Item(
                custom_id=cid,
                requested=resolution.requested_effort,
                applied=resolution.applied_effort,
                warnings=resolution.warnings,
                notes=[*notes, *transport_notes],
                overridden=reasoning.overridden(prepared),
                hints=hints,
                format=request.response_format,
                worst=worst or 0,
                hold=None,
            )
        )
    if len({cid for cid, _ in lines}) != len(lines):
        raise InvalidInputError("batch request ids must be unique")
    holds: list[BatchHold] = []
    if budget is not None:
        held = await budget.hold_batch(worsts)
        for item, hold in zip(items, held, strict=True):
            if hold is None:
                continue
            if hold not in holds:
                holds.append(hold)
            item.hold = holds.index(hold)
    record: dict[str, Any] = {
        "version": _FORMAT_VERSION,
        "wire": wire_kind,
        "provider": profile.id,
        "model": transport.source.model,
        "endpoint": transport.source.endpoint,
        "endpoint_path": "/v1/responses"
        if profile.wire == "openai_responses"
        else "/v1/chat/completions",
        "submitted_at": time.time(),
    }
    label = name or f"polythink-{int(record['submitted_at'])}"
    wire = _WIRES[wire_kind](transport, record)
    try:
        raw = await wire.submit(lines, label)
    except BaseException:
        if budget is not None:
            for hold in holds:
                await budget.release_batch(hold, hold.reserved, 0)
        raise
    record["id"] = wire.batch_id(raw)
    record["name"] = label
    job = BatchJob(client, source_index, record, items, holds)
    job._raw = raw
    job._record["state"] = wire.status(raw, len(items)).state
    return job


def resume_batch(
    client: _BatchClient,
    saved: str | Path | Mapping[str, Any],
    *,
    response_format: Any = None,
) -> BatchJob:
    """Attach a saved job (:meth:`BatchJob.save` or :meth:`BatchJob.to_dict`) to ``client``:
    the source with the job's provider, model and endpoint.

    ``response_format`` replaces the requests' saved formats (needed when a model class saved
    with the job cannot be imported here).

    Raises:
        ValueError: the file is not a saved batch job, or the client has no such source.
    """
    from polythink.middleware.budget import BatchHold

    data: Any = (
        json.loads(Path(saved).read_text(encoding="utf-8"))
        if isinstance(saved, str | Path)
        else saved
    )
    if not isinstance(data, Mapping) or data.get("version") != _FORMAT_VERSION or "id" not in data:
        raise InvalidInputError(
            "not a saved polythink batch job (version 1 JSON from BatchJob.save)"
        )
    wanted = (data["provider"], data["model"], data["endpoint"])
    index = next(
        (
            i
            for i, source in enumerate(client.sources)
            if (source.provider, source.model, source.endpoint) == wanted
        ),
        None,
    )
    if index is None:
        raise InvalidInputError(
            f"the client has no source {data['provider']}/{data['model']} at {data['endpoint']} "
            "to resume this batch on"
        )
    fmt = ResponseFormat.coerce(response_format)
    items = [_Item.from_json(item, fmt) for item in data["items"]]
    holds = [BatchHold.from_json(hold) for hold in data.get("holds", ())]
    record = {k: v for k, v in data.items() if k not in ("items", "holds")}
    return BatchJob(client, index, record, items, holds)
