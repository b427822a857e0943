"""Simulated batch APIs: OpenAI's Files and Batches, Anthropic's Message Batches, Gemini's batch
mode, each in its provider's own shapes (the same sources as :mod:`polythink.batch`).

Routes, under ``/{provider}/v1`` (the dialect is the provider's ``batches`` field):

- ``openai``: ``POST /files`` (multipart, ``purpose=batch``), ``GET /files/{id}`` and
  ``/files/{id}/content``, ``POST /batches``, ``GET /batches/{id}``, ``POST
  /batches/{id}/cancel``;
- ``anthropic``: ``POST /messages/batches``, ``GET /messages/batches/{id}``, ``POST
  /messages/batches/{id}/cancel``, ``GET /messages/batches/{id}/results``;
- ``gemini``: ``POST /models/{model}:batchGenerateContent``, ``GET /batches/{id}``, ``POST
  /batches/{id}:cancel``.

Each request of a batch is answered by the simulator's own wire module for that route, as if it
had been sent alone (the same answers, rejections included: a request the provider would refuse
ends ``errored`` / in the error file), so a batch's results are the calls' results.

The lifecycle runs on the batch clock (``Settings.batch_clock``, Unix seconds; a test moves it
by hand to run a day in a moment) with ``Settings.batch_timing``
(:class:`BatchTiming`): the batch validates (OpenAI ``validating``, Gemini ``PENDING``), then
runs its requests one after another, evenly over ``running`` seconds (a poll sees the counts
grow), then finalizes and completes. Its window (``window`` seconds from creation, 24 hours by
default) ends it ``expired`` with the requests not yet run; a cancel ends it ``cancelled``
after ``finalizing`` seconds with those not yet run. A file with a malformed line, a duplicate
``custom_id`` or a ``url`` other than the batch's endpoint fails validation (OpenAI
``failed`` with ``errors.data``).
"""

from __future__ import annotations

import datetime
import email.parser
import email.policy
import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from polythink.errors import InvalidInputError
from polythink.providers import PROVIDERS
from polythink.simulator import anthropic as anthropic_wire
from polythink.simulator import gemini as gemini_wire
from polythink.simulator import openai_chat, openai_responses
from polythink.simulator.prompt_cache import PrefixCache
from polythink.simulator.server import Settings, SimRequest, SimResponse

__all__ = ["BatchStore", "BatchTiming", "bad_request", "handle", "matches"]

_ROUTE = re.compile(
    r"^/(?P<provider>[^/]+)/v1(?:beta)?/(?:"
    r"(?P<files>files)(?:/(?P<file>[^/]+)(?P<content>/content)?)?"
    r"|(?P<messages>messages/)?batches(?:/(?P<batch>[^/:]+)(?P<action>/cancel|:cancel|/results)?)?"
    r"|models/(?P<model>[^/:]+):batchGenerateContent"
    r")$"
)
_EXPIRED = "This request could not be executed before the completion window expired."
_CANCELLED = "This request was not executed because the batch was cancelled."


@dataclass(frozen=True, slots=True)
class BatchTiming:
    """Seconds of a simulated batch's life on the batch clock.

    Attributes:
        validating: before the first request runs.
        running: over which the requests run, evenly, one after another.
        finalizing: after the last request (and after a cancel) before the batch ends.
        window: from creation to expiry (24 hours, as every provider's batch window).
    """

    validating: float = 2.0
    running: float = 60.0
    finalizing: float = 2.0
    window: float = 86_400.0


def matches(path: str) -> bool:
    """Whether ``path`` is a route of a batch API (or OpenAI's files)."""
    return ("/batches" in path or "/files" in path or ":batchGenerateContent" in path) and (
        _ROUTE.match(path) is not None
    )


def bad_request(message: str) -> dict[str, Any]:
    """An OpenAI-shaped 400 body (the route's own dialect answers its errors itself)."""
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}


class _Captured(SimResponse):
    """The answer channel of one request run inside a batch: it keeps the answer."""

    def __init__(self, request: SimRequest, settings: Settings) -> None:
        self.request = request
        self.settings = settings
        self.status = None
        self.streaming = False
        self.finished = False
        self.chunk_delay = 0.0
        self._by_status = None
        self._on_done = None
        self.body: bytes = b""
        # Each request of a batch is answered on its own, its prompt cache cold.
        self.prompt_cache = PrefixCache()

    async def send(
        self,
        status: int,
        body: bytes,
        *,
        content_type: str = "application/json",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.status = status
        self.body = body
        self.finished = True

    async def start_stream(
        self,
        status: int = 200,
        *,
        content_type: str = "text/event-stream",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        raise InvalidInputError("a batch request cannot be streamed")


@dataclass
class _Call:
    """One request to a batch API: the request, its answer channel, its route, its provider,
    the store and the batch clock's now."""

    request: SimRequest
    response: SimResponse
    route: re.Match[str]
    provider: str
    store: BatchStore
    now: float


@dataclass
class _Entry:
    custom_id: str
    path: str
    body: bytes


@dataclass
class _Batch:
    id: str
    dialect: str
    provider: str
    created: float
    entries: list[_Entry]
    headers: dict[str, str]
    timing: BatchTiming
    endpoint: str = ""
    model: str = ""
    name: str = ""
    input_file_id: str = ""
    metadata: Any = None
    errors: list[dict[str, Any]] = field(default_factory=list)
    cancelled_at: float | None = None
    outcomes: list[tuple[int, Any]] = field(default_factory=list)
    files: tuple[str | None, str | None] | None = None

    def ran_by(self, now: float) -> int:
        """How many requests have run by ``now`` (they run in order, evenly)."""
        timing = self.timing
        end = min(now, self.created + timing.window)
        if self.cancelled_at is not None:
            end = min(end, self.cancelled_at)
        started = end - self.created - timing.validating
        if started <= 0 or self.errors:
            return 0
        if started >= timing.running:
            return len(self.entries)
        return math.floor(len(self.entries) * started / timing.running)

    def phase(self, now: float) -> str:
        """``validating``, ``in_progress``, ``finalizing``, ``completed``, ``failed``,
        ``expired``, ``cancelling`` or ``cancelled`` at ``now``."""
        timing = self.timing
        age = now - self.created
        if self.cancelled_at is not None:
            if now < self.cancelled_at + timing.finalizing:
                return "cancelling"
            return "cancelled"
        if age < timing.validating:
            return "validating"
        if self.errors:
            return "failed"
        done = timing.validating + timing.running
        if timing.window < done and age >= timing.window:
            return "expired"
        if age < done:
            return "in_progress"
        if age < done + timing.finalizing:
            return "finalizing"
        return "completed"


class BatchStore:
    """What the simulated batch APIs hold: uploaded files, batches and their answers."""

    def __init__(self) -> None:
        self.files: dict[str, tuple[str, bytes, str]] = {}
        self.batches: dict[str, _Batch] = {}
        self._next = 0

    def new_id(self, prefix: str, seed: str) -> str:
        self._next += 1
        return f"{prefix}{hashlib.sha256(f'{seed}{self._next}'.encode()).hexdigest()[:24]}"


def _timing(settings: Settings) -> BatchTiming:
    timing = settings.batch_timing
    return timing if isinstance(timing, BatchTiming) else BatchTiming()


def _store(settings: Settings) -> BatchStore:
    store: BatchStore | None = settings.batch_store
    if store is None:
        store = settings.batch_store = BatchStore()
    return store


def _iso(seconds: float) -> str:
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def _run(batch: _Batch, settings: Settings, upto: int) -> None:
    """Answer the batch's requests up to ``upto`` (those not answered yet), each through the
    simulator's own wire module for its route."""
    while len(batch.outcomes) < upto:
        entry = batch.entries[len(batch.outcomes)]
        request = SimRequest("POST", entry.path, {}, batch.headers, entry.body)
        captured = _Captured(request, settings)
        if batch.dialect == "anthropic":
            await anthropic_wire.handle(request, captured)
        elif batch.dialect == "gemini":
            await gemini_wire.handle(request, captured)
        elif entry.path.endswith("/responses"):
            await openai_responses.handle(request, captured)
        else:
            await openai_chat.handle(request, captured)
        answer = json.loads(captured.body) if captured.body else None
        if batch.dialect == "anthropic" and captured.status == 200 and isinstance(answer, dict):
            # A batch's answers are served at the batch tier (usage.service_tier "batch").
            answer.setdefault("usage", {})["service_tier"] = "batch"
        batch.outcomes.append((captured.status or 500, answer))


async def handle(request: SimRequest, response: SimResponse) -> None:
    """Answer one request of a simulated batch API."""
    route = _ROUTE.match(request.path)
    assert route is not None
    provider = route["provider"]
    profile = PROVIDERS.get(provider)
    dialect = profile.batches if profile is not None else None
    settings = response.settings
    store = _store(settings)
    now = settings.batch_clock()
    call = _Call(request, response, route, provider, store, now)
    if dialect == "openai":
        await _openai(call)
    elif dialect == "anthropic" and (route["messages"] or route["batch"] is None):
        await _anthropic(call)
    elif dialect == "gemini" and not route["files"]:
        await _gemini(call)
    else:
        await response.send_json(
            404, {"error": {"message": f"no batch API for {provider}", "type": "not_found"}}
        )


# ---------------------------------------------------------------- OpenAI


def _openai_error(status: int, message: str, code: str | None = None) -> tuple[int, Any]:
    return status, {
        "error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}
    }


def _multipart(request: SimRequest) -> dict[str, tuple[str | None, bytes]]:
    """The parts of a ``multipart/form-data`` body: name -> (file name, bytes)."""
    head = f"Content-Type: {request.headers.get('content-type', '')}\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + request.body)
    parts: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str) and isinstance(payload, bytes):
            parts[name] = (part.get_filename(), payload)
    return parts


def _openai_batch(batch: _Batch, now: float) -> dict[str, Any]:
    phase = batch.phase(now)
    timing = batch.timing
    ran = batch.ran_by(now)
    failed = sum(1 for status, _ in batch.outcomes[:ran] if status >= 300)
    obj: dict[str, Any] = {
        "id": batch.id,
        "object": "batch",
        "endpoint": batch.endpoint,
        "errors": {"object": "list", "data": batch.errors} if batch.errors else None,
        "input_file_id": batch.input_file_id,
        "completion_window": "24h",
        "status": phase,
        "output_file_id": None,
        "error_file_id": None,
        "created_at": int(batch.created),
        "in_progress_at": None,
        "expires_at": int(batch.created + timing.window),
        "finalizing_at": None,
        "completed_at": None,
        "failed_at": None,
        "expired_at": None,
        "cancelling_at": int(batch.cancelled_at) if batch.cancelled_at is not None else None,
        "cancelled_at": None,
        "request_counts": {
            "total": len(batch.entries),
            "completed": ran - failed,
            "failed": failed,
        },
        "metadata": batch.metadata,
    }
    if phase not in ("validating", "failed"):
        obj["in_progress_at"] = int(batch.created + timing.validating)
    if phase == "failed":
        obj["failed_at"] = int(batch.created + timing.validating)
        obj["request_counts"] = {"total": len(batch.entries), "completed": 0, "failed": 0}
    end = batch.created + timing.validating + timing.running
    if phase in ("finalizing", "completed"):
        obj["finalizing_at"] = int(end)
    if phase == "completed":
        obj["completed_at"] = int(end + timing.finalizing)
    if phase == "expired":
        obj["expired_at"] = int(batch.created + timing.window)
    if phase == "cancelled" and batch.cancelled_at is not None:
        obj["cancelled_at"] = int(batch.cancelled_at + timing.finalizing)
    if batch.files is not None:
        obj["output_file_id"], obj["error_file_id"] = batch.files
    return obj


def _openai_files(batch: _Batch, store: BatchStore, now: float) -> None:
    """Write the output and error files of a batch that has ended (once)."""
    if batch.files is not None or batch.phase(now) not in ("completed", "expired", "cancelled"):
        return
    ran = batch.ran_by(now)
    output: list[bytes] = []
    errors: list[bytes] = []
    for index, entry in enumerate(batch.entries):
        line_id = f"batch_req_{hashlib.sha256(f'{batch.id}{index}'.encode()).hexdigest()[:24]}"
        if index < ran:
            status, body = batch.outcomes[index]
            line = {
                "id": line_id,
                "custom_id": entry.custom_id,
                "response": {
                    "status_code": status,
                    "request_id": f"req_{line_id[10:]}",
                    "body": body,
                },
                "error": None,
            }
            (output if status < 300 else errors).append(json.dumps(line).encode())
        else:
            code, message = (
                ("batch_cancelled", _CANCELLED)
                if batch.cancelled_at is not None
                else ("batch_expired", _EXPIRED)
            )
            line = {
                "id": line_id,
                "custom_id": entry.custom_id,
                "response": None,
                "error": {"code": code, "message": message},
            }
            errors.append(json.dumps(line).encode())
    ids: list[str | None] = []
    for kind, lines in (("output", output), ("errors", errors)):
        if not lines:
            ids.append(None)
            continue
        file_id = store.new_id("file-", batch.id + kind)
        store.files[file_id] = (
            f"batch_{batch.id}_{kind}.jsonl",
            b"\n".join(lines) + b"\n",
            "batch_output",
        )
        ids.append(file_id)
    batch.files = (ids[0], ids[1])


async def _openai(call: _Call) -> None:
    request, response, route = call.request, call.response, call.route
    provider, store, now = call.provider, call.store, call.now
    settings = response.settings
    if route["files"]:
        file_id = route["file"]
        if file_id is None and request.method == "POST":
            parts = _multipart(request)
            purpose = parts.get("purpose", (None, b""))[1].decode()
            upload = parts.get("file")
            if upload is None or purpose != "batch":
                await response.send_json(
                    *_openai_error(400, "A 'file' part with purpose 'batch' is required.")
                )
                return
            file_id = store.new_id("file-", upload[0] or "")
            store.files[file_id] = (upload[0] or "upload.jsonl", upload[1], purpose)
            await response.send_json(200, _file_object(file_id, store, now))
            return
        if file_id not in store.files:
            await response.send_json(*_openai_error(404, f"No such File object: {file_id}"))
            return
        if route["content"]:
            await response.send(
                200, store.files[file_id][1], content_type="application/octet-stream"
            )
        else:
            await response.send_json(200, _file_object(file_id, store, now))
        return
    if route["batch"] is None:
        if request.method != "POST":
            await response.send_json(*_openai_error(405, "Only POST creates a batch here."))
            return
        await _openai_create(request, response, provider, store, now)
        return
    batch = store.batches.get(route["batch"])
    if batch is None:
        await response.send_json(*_openai_error(404, f"No batch found with id '{route['batch']}'."))
        return
    if route["action"] == "/cancel":
        if batch.phase(now) in ("completed", "failed", "expired", "cancelled"):
            message = f"Cannot cancel a batch with status '{batch.phase(now)}'."
            await response.send_json(*_openai_error(409, message))
            return
        batch.cancelled_at = now
    await _run(batch, settings, batch.ran_by(now))
    _openai_files(batch, store, now)
    await response.send_json(200, _openai_batch(batch, now))


def _file_object(file_id: str, store: BatchStore, now: float) -> dict[str, Any]:
    name, data, purpose = store.files[file_id]
    return {
        "id": file_id,
        "object": "file",
        "bytes": len(data),
        "created_at": int(now),
        "filename": name,
        "purpose": purpose,
        "status": "processed",
        "expires_at": None,
        "status_details": None,
    }


async def _openai_create(
    request: SimRequest, response: SimResponse, provider: str, store: BatchStore, now: float
) -> None:
    try:
        body = request.json()
    except ValueError:
        await response.send_json(*_openai_error(400, "We could not parse the JSON body."))
        return
    file_id = body.get("input_file_id") if isinstance(body, Mapping) else None
    endpoint = body.get("endpoint") if isinstance(body, Mapping) else None
    if body.get("completion_window") != "24h" or endpoint not in (
        "/v1/chat/completions",
        "/v1/responses",
    ):
        await response.send_json(
            *_openai_error(
                400, "completion_window must be '24h' and endpoint a supported endpoint."
            )
        )
        return
    if file_id not in store.files:
        await response.send_json(*_openai_error(400, f"No such File object: {file_id}"))
        return
    entries: list[_Entry] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    route = f"/{provider}/v1/{endpoint.removeprefix('/v1/')}"
    for number, raw in enumerate(store.files[file_id][1].splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            errors.append(
                {
                    "code": "invalid_json_line",
                    "message": "This line is not valid JSON.",
                    "param": None,
                    "line": number,
                }
            )
            continue
        cid = line.get("custom_id") if isinstance(line, Mapping) else None
        if not isinstance(cid, str) or cid in seen:
            errors.append(
                {
                    "code": "duplicate_custom_id" if cid in seen else "missing_required_parameter",
                    "message": "Each line needs a unique custom_id.",
                    "param": "custom_id",
                    "line": number,
                }
            )
            continue
        if line.get("url") != endpoint or line.get("method") != "POST":
            errors.append(
                {
                    "code": "mismatched_endpoint",
                    "message": f"The url of each line must be {endpoint}.",
                    "param": "url",
                    "line": number,
                }
            )
            continue
        seen.add(cid)
        entries.append(_Entry(cid, route, json.dumps(line.get("body")).encode()))
    batch = _Batch(
        id=store.new_id("batch_", file_id),
        dialect="openai",
        provider=provider,
        created=now,
        entries=entries,
        headers=_item_headers(request),
        timing=_timing(response.settings),
        endpoint=endpoint,
        input_file_id=file_id,
        metadata=body.get("metadata"),
        errors=errors,
    )
    store.batches[batch.id] = batch
    await response.send_json(200, _openai_batch(batch, now))


def _item_headers(request: SimRequest) -> dict[str, str]:
    skip = {"content-length", "content-type", "host", "accept", "connection"}
    return {k: v for k, v in request.headers.items() if k not in skip}


# ---------------------------------------------------------------- Anthropic


def _anthropic_batch(batch: _Batch, now: float, base: str) -> dict[str, Any]:
    phase = batch.phase(now)
    ended = phase in ("completed", "expired", "cancelled")
    ran = batch.ran_by(now)
    errored = sum(1 for status, _ in batch.outcomes[:ran] if status >= 300)
    total = len(batch.entries)
    counts = {"processing": total, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
    if ended:
        rest = total - ran
        counts = {
            "processing": 0,
            "succeeded": ran - errored,
            "errored": errored,
            "canceled": rest if phase == "cancelled" else 0,
            "expired": rest if phase == "expired" else 0,
        }
    timing = batch.timing
    ended_at: float | None = None
    if phase == "completed":
        ended_at = batch.created + timing.validating + timing.running + timing.finalizing
    elif phase == "expired":
        ended_at = batch.created + timing.window
    elif phase == "cancelled" and batch.cancelled_at is not None:
        ended_at = batch.cancelled_at + timing.finalizing
    return {
        "id": batch.id,
        "type": "message_batch",
        "processing_status": "ended"
        if ended
        else "canceling"
        if phase == "cancelling"
        else "in_progress",
        "request_counts": counts,
        "created_at": _iso(batch.created),
        "expires_at": _iso(batch.created + timing.window),
        "ended_at": _iso(ended_at) if ended_at is not None else None,
        "archived_at": None,
        "cancel_initiated_at": _iso(batch.cancelled_at) if batch.cancelled_at is not None else None,
        "results_url": f"{base}/messages/batches/{batch.id}/results" if ended else None,
    }


async def _anthropic(call: _Call) -> None:
    request, response, route = call.request, call.response, call.route
    provider, store, now = call.provider, call.store, call.now
    settings = response.settings
    base = f"http://{request.headers.get('host', '127.0.0.1')}/{provider}/v1"
    if route["batch"] is None:
        try:
            body = request.json()
        except ValueError:
            body = None
        requests = body.get("requests") if isinstance(body, Mapping) else None
        problem = _anthropic_requests(requests)
        if problem is not None:
            await response.send_json(400, anthropic_wire.bad_request(problem))
            return
        assert isinstance(requests, list)
        batch = _Batch(
            id=store.new_id("msgbatch_", str(now)),
            dialect="anthropic",
            provider=provider,
            created=now,
            entries=[
                _Entry(r["custom_id"], f"/{provider}/v1/messages", json.dumps(r["params"]).encode())
                for r in requests
            ],
            headers=_item_headers(request),
            timing=_timing(settings),
        )
        store.batches[batch.id] = batch
        await response.send_json(200, _anthropic_batch(batch, now, base))
        return
    found = store.batches.get(route["batch"])
    if found is None or found.dialect != "anthropic":
        await response.send_json(
            404,
            {"type": "error", "error": {"type": "not_found_error", "message": "Batch not found."}},
        )
        return
    batch = found
    if route["action"] == "/cancel" and batch.phase(now) not in (
        "completed",
        "expired",
        "cancelled",
    ):
        batch.cancelled_at = now
    await _run(batch, settings, batch.ran_by(now))
    if route["action"] == "/results":
        summary = _anthropic_batch(batch, now, base)
        if summary["processing_status"] != "ended":
            message = f"Batch {batch.id} has not ended: results are not available yet."
            await response.send_json(400, anthropic_wire.bad_request(message))
            return
        await response.send(200, _anthropic_results(batch, now), content_type="application/binary")
        return
    await response.send_json(200, _anthropic_batch(batch, now, base))


_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _anthropic_requests(requests: Any) -> str | None:
    if not isinstance(requests, list) or not requests:
        return "requests: Field required (a non-empty list)"
    seen: set[str] = set()
    for i, item in enumerate(requests):
        cid = item.get("custom_id") if isinstance(item, Mapping) else None
        if not isinstance(cid, str) or not _CUSTOM_ID.match(cid):
            return f"requests.{i}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
        if cid in seen:
            return f"Duplicate custom_id: {cid}"
        seen.add(cid)
        if not isinstance(item.get("params"), Mapping):
            return f"requests.{i}.params: Field required"
    return None


def _anthropic_results(batch: _Batch, now: float) -> bytes:
    ran = batch.ran_by(now)
    lines = []
    for index, entry in enumerate(batch.entries):
        if index < ran:
            status, body = batch.outcomes[index]
            result: dict[str, Any] = (
                {"type": "succeeded", "message": body}
                if status < 300
                else {"type": "errored", "error": body}
            )
        else:
            result = {"type": "canceled" if batch.cancelled_at is not None else "expired"}
        lines.append(json.dumps({"custom_id": entry.custom_id, "result": result}).encode())
    # The API gives results in any order: the simulator gives them last first.
    return b"\n".join(reversed(lines)) + b"\n"


# ---------------------------------------------------------------- Gemini

_OUTPUT_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatchOutput"
_GEMINI_STATES = {
    "validating": "BATCH_STATE_PENDING",
    "in_progress": "BATCH_STATE_RUNNING",
    "finalizing": "BATCH_STATE_RUNNING",
    "completed": "BATCH_STATE_SUCCEEDED",
    "failed": "BATCH_STATE_FAILED",
    "expired": "BATCH_STATE_EXPIRED",
    "cancelling": "BATCH_STATE_RUNNING",
    "cancelled": "BATCH_STATE_CANCELLED",
}


def _gemini_batch(batch: _Batch, now: float) -> dict[str, Any]:
    phase = batch.phase(now)
    ran = batch.ran_by(now)
    failed = sum(1 for status, _ in batch.outcomes[:ran] if status >= 300)
    done = phase in ("completed", "failed", "expired", "cancelled")
    metadata: dict[str, Any] = {
        "@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatch",
        "model": f"models/{batch.model}",
        "displayName": batch.name,
        "createTime": _iso(batch.created),
        "updateTime": _iso(now),
        "state": _GEMINI_STATES[phase],
        "batchStats": {
            "requestCount": str(len(batch.entries)),
            "successfulRequestCount": str(ran - failed),
            "failedRequestCount": str(failed),
            "pendingRequestCount": str(len(batch.entries) - ran),
        },
    }
    operation: dict[str, Any] = {"name": f"batches/{batch.id}", "metadata": metadata, "done": done}
    if done:
        metadata["endTime"] = _iso(now)
        inlined = []
        for index, entry in enumerate(batch.entries[:ran]):
            status, body = batch.outcomes[index]
            key = {"key": entry.custom_id}
            if status < 300:
                inlined.append({"response": body, "metadata": key})
            else:
                inlined.append({"error": (body or {}).get("error", body), "metadata": key})
        output = {"inlinedResponses": {"inlinedResponses": inlined}}
        metadata["output"] = output
        operation["response"] = {"@type": _OUTPUT_TYPE, **output}
    return operation


def _gemini_error(status: int, message: str) -> dict[str, Any]:
    kinds = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND"}
    return {"error": {"code": status, "message": message, "status": kinds.get(status, "UNKNOWN")}}


async def _gemini(call: _Call) -> None:
    request, response, route = call.request, call.response, call.route
    provider, store, now = call.provider, call.store, call.now
    settings = response.settings
    model = route["model"]
    if model is not None:
        try:
            body = request.json()
            batch_body = body["batch"]
            requests = batch_body["inputConfig"]["requests"]["requests"]
            entries = [
                _Entry(
                    str(item["metadata"]["key"]),
                    f"/{provider}/v1/models/{model}:generateContent",
                    json.dumps(item["request"]).encode(),
                )
                for item in requests
            ]
        except (ValueError, KeyError, TypeError):
            message = "* BatchGenerateContentRequest.batch.input_config: requests are required"
            await response.send_json(400, _gemini_error(400, message))
            return
        batch = _Batch(
            id=store.new_id("", str(now)),
            dialect="gemini",
            provider=provider,
            created=now,
            entries=entries,
            headers=_item_headers(request),
            timing=_timing(settings),
            model=model,
            name=str(batch_body.get("displayName") or ""),
        )
        store.batches[batch.id] = batch
        await response.send_json(200, _gemini_batch(batch, now))
        return
    found = store.batches.get(route["batch"])
    if found is None or found.dialect != "gemini":
        await response.send_json(
            404, _gemini_error(404, f"Batch batches/{route['batch']} not found.")
        )
        return
    batch = found
    if route["action"] == ":cancel":
        if batch.phase(now) not in ("completed", "failed", "expired", "cancelled"):
            batch.cancelled_at = now
        await response.send_json(200, {})
        return
    await _run(batch, settings, batch.ran_by(now))
    await response.send_json(200, _gemini_batch(batch, now))
