"""What the cloud tests share: the requests polythink sent as the server got them (signed),
a client that records them, the weather tool, and a thinking tool loop."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from polythink import Client, Message, Source, Tool

WEATHER = Tool(
    name="get_weather",
    description="Current weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


CLOUD_ENVIRONMENT = (
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_BEARER_TOKEN_BEDROCK",
    "GOOGLE_CLOUD_PROJECT",
    "ANTHROPIC_VERTEX_PROJECT_ID",
    "GOOGLE_CLOUD_LOCATION",
    "CLOUD_ML_REGION",
    "GOOGLE_API_KEY",
    "AZURE_OPENAI_ENDPOINT",
    "AZURE_OPENAI_API_KEY",
    "AZURE_API_KEY",
)
"""The variables that give a cloud source its region, project, endpoint or key."""


def clear_cloud_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset :data:`CLOUD_ENVIRONMENT`, so a source's settings are the test's alone."""
    for name in CLOUD_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)


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
