"""What the cloud tests share: the requests polythink sent as the server got them (signed),
a client that records them, the weather tool, and a thinking tool loop."""

from __future__ import annotations

import json
from typing import Any

import httpx

from polythink import Client, Message, Source, Tool

WEATHER = Tool(
    name="get_weather",
    description="Current weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


class Wire:
    """The requests polythink sent, after signing, as httpx's request hook sees them."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    async def hook(self, request: httpx.Request) -> None:
        self.requests.append(request)

    @property
    def body(self) -> Any:
        """The last request's JSON body."""
        return json.loads(self.requests[-1].content)


def recorded(source: Source, wire: Wire) -> tuple[httpx.AsyncClient, Client]:
    """A client of ``source`` whose HTTP client records each request in ``wire``."""
    http = httpx.AsyncClient(event_hooks={"request": [wire.hook]})
    return http, Client([source], http_client=http, cache=False)


async def tool_loop(client: Client, *, stream: bool, rounds: int = 3) -> list[Any]:
    """Ask for the weather at ``high`` until the model answers in text: each assistant turn
    goes back with its reasoning, each call with a result."""
    messages: list[Any] = [Message(role="user", content="What is the weather in Paris?")]
    responses = []
    for _ in range(rounds):
        if stream:
            events = [
                e async for e in client.stream(messages, reasoning_effort="high", tools=[WEATHER])
            ]
            response = events[-1].response
        else:
            response = await client.complete(messages, reasoning_effort="high", tools=[WEATHER])
        responses.append(response)
        if not response.tool_calls:
            break
        messages.append(response.message)
        for call in response.tool_calls:
            messages.append(
                Message(
                    role="tool", tool_call_id=call.id, name=call.name, content='{"sky":"clear"}'
                )
            )
    return responses
