"""Send a call that a model takes only on the Responses API there, from a Chat source.

GPT-6 Astra and GPT-6.1 Sol take function tools on the Responses API only, GPT-6 Sol and Luna
on Chat Completions only at ``reasoning_effort: none`` (O-DEPLOY, CURRENT.md §2.1), and
``reasoning.mode`` exists on the Responses API only. An ``openai`` source reaches both APIs
with the same key and host (``ProviderProfile.responses_profile``), so such a call goes to
``POST {base_url}/responses`` instead of failing with OpenAI's 400 "Function tools with
reasoning_effort are not supported for … in /v1/chat/completions". The decision is
:func:`polythink.reasoning.resolve.responses_call` (also what :func:`polythink.resolve` with
``tools`` and :meth:`polythink.Client.plan` report): the reasoning fragment the source resolved
is spelt again for the Responses wire, and the response says where it went in ``warnings``.
Calls that Chat takes stay on Chat.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator
from typing import Any

import httpx

from polythink.providers import get_provider
from polythink.reasoning.capability import Capability
from polythink.reasoning.resolve import responses_call
from polythink.transports.base import HTTPTransport, with_notes
from polythink.types import Request, Response, StreamEvent

__all__ = ["ResponsesRoute", "with_responses_route"]


class ResponsesRoute:
    """A source's transport that sends the calls its model takes only on the Responses API
    there, and every other call to its own (Chat Completions) transport.

    Args:
        chat: the source's own transport.
        responses: a Responses transport for the same source (same key and host).
        capability: the model's capability (``chat_tools``), or ``None``.
    """

    def __init__(
        self, chat: HTTPTransport, responses: HTTPTransport, capability: Capability | None
    ) -> None:
        self.chat = chat
        self.responses = responses
        self.capability = capability
        self._mode = chat.source.reasoning_mode

    def _route(self, request: Request) -> tuple[Request, str] | None:
        routed = responses_call(
            request.resolution,
            profile=self.chat.profile,
            capability=self.capability,
            tools=bool(request.tools),
            reasoning_mode=self._mode,
            max_tokens=request.max_tokens,
        )
        if routed is None:
            return None
        resolution, note = routed
        return request.with_(resolution=resolution), note

    async def complete(self, request: Request) -> Response:
        """Send the call to the API its model takes it on."""
        routed = self._route(request)
        if routed is None:
            return await self.chat.complete(request)
        response = await self.responses.complete(routed[0])
        return with_notes(response, [routed[1]])

    async def stream(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
        """Stream the call from the API its model takes it on."""
        routed = self._route(request)
        if routed is None:
            async for event in self.chat.stream(request):
                yield event
            return
        async for event in self.responses.stream(routed[0]):
            if event.type == "done" and event.response is not None:
                event = dataclasses.replace(event, response=with_notes(event.response, [routed[1]]))
            yield event


def with_responses_route(transport: Any, *, client: httpx.AsyncClient, api_key: str | None) -> Any:
    """Return ``transport``, or a :class:`ResponsesRoute` around it when its source's model
    takes some calls on the Responses API only (``Capability.chat_tools``) or the source sets
    ``reasoning_mode``, and its profile reaches that API (``responses_profile``)."""
    profile = getattr(transport, "profile", None)
    if profile is None or profile.responses_profile is None:
        return transport
    source = transport.source
    capability = source.capability
    needed = source.reasoning_mode is not None or (
        capability is not None and capability.chat_tools != "any"
    )
    if not needed:
        return transport
    from polythink.transports.openai_responses import OpenAIResponsesTransport

    responses = OpenAIResponsesTransport(
        source=source,
        index=transport.index,
        profile=get_provider(profile.responses_profile),
        client=client,
        api_key=api_key,
    )
    return ResponsesRoute(transport, responses, capability)
