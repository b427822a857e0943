"""What the simulated clouds share: their credentials, the checks they make of a request's
auth, AWS event-stream framing, and an answer channel that re-frames a base wire's answer.

The simulator is offline: it accepts only the credentials below, which the demo and the tests
give polythink (they are not secrets of any real account). A request signed with SigV4 is
verified the way AWS verifies one (docs.aws.amazon.com/IAM/latest/UserGuide/
create-signed-request.html, the algorithm botocore 1.44.8's ``SigV4Auth`` implements): the
canonical request from the method, the path as received URI-encoded once more, the query, the
signed headers' values and the body's SHA-256; the key derived from the secret, date,
region and service; HMAC-SHA256 over the string to sign. It is written here independently of
botocore, so a signature polythink makes with botocore is checked against the specification,
not against itself.
"""

from __future__ import annotations

import binascii
import datetime
import hashlib
import hmac
import json
import struct
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from polythink.simulator.server import SimRequest, SimResponse

__all__ = [
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_TEMPORARY_KEY_ID",
    "AZURE_API_KEY",
    "AZURE_TOKEN_PREFIX",
    "BEDROCK_API_KEY",
    "GOOGLE_TOKEN_PREFIX",
    "VERTEX_API_KEY",
    "Relay",
    "event_frame",
    "sigv4_problem",
]

AWS_ACCESS_KEY_ID = "AKIDPOLYTHINKSIM0001"
"""The long-term access key id the simulated Bedrock accepts."""
AWS_SECRET_ACCESS_KEY = "polythink+simulator/aws-secret-key-0001"
"""Its secret access key."""
AWS_TEMPORARY_KEY_ID = "ASIAPOLYTHINKSIM0002"
"""A temporary access key id, valid only with :data:`AWS_SESSION_TOKEN`."""
AWS_SESSION_TOKEN = "polythink-simulator-session-token-0002"
"""The session token of :data:`AWS_TEMPORARY_KEY_ID` (same secret)."""
BEDROCK_API_KEY = "bedrock-api-key-cG9seXRoaW5rLXNpbXVsYXRvcg=="
"""The Bedrock API key (a bearer token) the simulated Bedrock accepts."""
GOOGLE_TOKEN_PREFIX = "ya29.polythink-sim."
"""Vertex accepts any OAuth access token that starts with this."""
VERTEX_API_KEY = "AIzaSyPolythinkSimulatorVertexKey0001"
"""The express-mode API key the simulated Vertex accepts."""
AZURE_API_KEY = "polythink-simulator-azure-key-0001"
"""The ``api-key`` the simulated Azure accepts."""
AZURE_TOKEN_PREFIX = "eyJ0eXAi.polythink-sim."
"""Azure accepts any Entra ID bearer token that starts with this."""

_SECRETS = {AWS_ACCESS_KEY_ID: AWS_SECRET_ACCESS_KEY, AWS_TEMPORARY_KEY_ID: AWS_SECRET_ACCESS_KEY}
_SKEW = datetime.timedelta(minutes=15)


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def sigv4_problem(request: SimRequest, service: str = "bedrock") -> str | None:
    """What is wrong with ``request``'s SigV4 signature, or ``None`` when it verifies.

    Checks the ``Authorization`` header's form, the access key (and its session token), the
    credential scope's service, the ``X-Amz-Date`` (within 15 minutes of now, as AWS allows
    skew) and the signature over the canonical request.
    """
    header = request.headers.get("authorization", "")
    if not header.startswith("AWS4-HMAC-SHA256 "):
        return "Missing Authentication Token"
    fields: dict[str, str] = {}
    for part in header[len("AWS4-HMAC-SHA256 ") :].split(","):
        name, _, value = part.strip().partition("=")
        fields[name] = value
    credential = fields.get("Credential", "").split("/")
    signed = fields.get("SignedHeaders", "")
    signature = fields.get("Signature", "")
    if len(credential) != 5 or not signed or not signature:
        return "Authorization header requires Credential, SignedHeaders and Signature"
    key_id, day, region, scope_service, terminator = credential
    secret = _SECRETS.get(key_id)
    if secret is None:
        return "The security token included in the request is invalid."
    if key_id == AWS_TEMPORARY_KEY_ID and (
        request.headers.get("x-amz-security-token") != AWS_SESSION_TOKEN
    ):
        return "The security token included in the request is invalid."
    if scope_service != service or terminator != "aws4_request":
        return f"Credential should be scoped to correct service: '{service}'."
    stamp = request.headers.get("x-amz-date", "")
    try:
        when = datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.UTC)
    except ValueError:
        return "X-Amz-Date is missing or malformed"
    if abs(datetime.datetime.now(datetime.UTC) - when) > _SKEW or stamp[:8] != day:
        return "Signature expired"
    names = signed.split(";")
    if "host" not in names or any(name not in request.headers for name in names):
        return "Signed headers must include host and be present in the request"
    canonical_headers = "".join(
        f"{name}:{' '.join(request.headers[name].split())}\n" for name in names
    )
    query = "&".join(
        f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(request.query.items())
    )
    canonical = "\n".join(
        (
            request.method.upper(),
            quote(request.path, safe="/~"),
            query,
            canonical_headers,
            signed,
            hashlib.sha256(request.body).hexdigest(),
        )
    )
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = "\n".join(
        ("AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest())
    )
    key = _hmac(f"AWS4{secret}".encode(), day)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, signature):
        return (
            "The request signature we calculated does not match the signature you provided. "
            "Check your AWS Secret Access Key and signing method."
        )
    return None


def _header(name: str, value: str) -> bytes:
    encoded = value.encode()
    return (
        struct.pack("B", len(name))
        + name.encode()
        + b"\x07"
        + struct.pack(">H", len(encoded))
        + encoded
    )


def event_frame(headers: Mapping[str, str], payload: bytes, *, corrupt: bool = False) -> bytes:
    """One AWS event-stream message (CLOUDS.md §1.7): prelude (total length, headers length,
    CRC32 of those 8 bytes), string headers, payload, CRC32 of all before it. ``corrupt``
    spoils the message checksum (a malformed frame)."""
    head = b"".join(_header(name, value) for name, value in headers.items())
    total = 12 + len(head) + len(payload) + 4
    lengths = struct.pack(">II", total, len(head))
    prelude = lengths + struct.pack(">I", binascii.crc32(lengths))
    body = prelude + head + payload
    crc = binascii.crc32(body) ^ (0xFFFFFFFF if corrupt else 0)
    return body + struct.pack(">I", crc)


def event(event_type: str, payload: Any) -> bytes:
    """An ``event`` message of ``event_type`` with a JSON payload."""
    return event_frame(
        {
            ":event-type": event_type,
            ":content-type": "application/json",
            ":message-type": "event",
        },
        json.dumps(payload, separators=(",", ":")).encode(),
    )


def exception(exception_type: str, message: str) -> bytes:
    """An ``exception`` message (``throttlingException`` …) carrying ``{"message": …}``."""
    return event_frame(
        {
            ":exception-type": exception_type,
            ":content-type": "application/json",
            ":message-type": "exception",
        },
        json.dumps({"message": message}).encode(),
    )


class Relay(SimResponse):
    """The answer channel handed to a base wire's handler by a simulated cloud: every byte
    still goes through the channel the cloud was given (so faults and chunk delays apply
    there once), while the cloud sees the base wire's answer and may reshape it.

    Subclasses override :meth:`answer` (a whole answer), :meth:`opened` (a stream's head)
    and :meth:`relay_event` (one SSE event of a stream).
    """

    def __init__(self, outer: SimResponse, request: SimRequest) -> None:
        # The server's prompt cache: a cloud's requests are cached as the base wire's are.
        super().__init__(outer._writer, request, outer.settings, prompt_cache=outer.prompt_cache)
        self.outer = outer
        self.chunk_delay = 0.0

    async def answer(
        self, status: int, body: bytes, content_type: str, headers: Mapping[str, str] | None
    ) -> None:
        await self.outer.send(status, body, content_type=content_type, headers=headers)

    async def opened(self, status: int, headers: Mapping[str, str] | None) -> None:
        await self.outer.start_stream(status, headers=headers)

    async def relay_event(self, data: str, event: str | None) -> None:
        head = f"event: {event}\n" if event else ""
        await self.outer.write(f"{head}data: {data}\n\n".encode())

    async def send(
        self,
        status: int,
        body: bytes,
        *,
        content_type: str = "application/json",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.status = status
        await self.answer(status, body, content_type, headers)
        self.finished = self.outer.finished

    async def start_stream(
        self,
        status: int = 200,
        *,
        content_type: str = "text/event-stream",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.status = status
        self.streaming = True
        await self.opened(status, headers)

    async def write(self, data: bytes) -> None:
        await self.outer.write(data)

    async def write_event(self, data: str, event: str | None = None, sep: str = "\n") -> None:
        await self.relay_event(data, event)

    async def end(self) -> None:
        if not self.outer.finished:
            await self.outer.end()
        self.finished = True

    def reset(self) -> None:
        self.outer.reset()
