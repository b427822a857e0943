"""polythink: an async LLM client with one reasoning-effort vocabulary across providers.

Quick start::

    from polythink import Client, Source

    async with Client(sources=[Source("openai", "gpt-5.5", reasoning_effort="high")]) as client:
        response = await client.complete([{"role": "user", "content": "hi"}])
        print(response.text, response.applied_effort, response.usage)
"""

from polythink.client import Client
from polythink.config import Source, Timeout
from polythink.conversation import compact, should_compact
from polythink.errors import (
    AuthError,
    ClientClosedError,
    ContextWindowExceededError,
    PolythinkError,
    RateLimitedError,
    RequestRejectedError,
    RequestTimeoutError,
    StreamInterruptedError,
    ThinkingUnsupportedError,
    TransientError,
)
from polythink.providers import PROVIDERS, ProviderProfile, register_provider
from polythink.reasoning.capabilities import Capability, get_capability, register_capability
from polythink.reasoning.resolve import resolve
from polythink.types import (
    EFFORT_ORDER,
    Cost,
    DoneEvent,
    Effort,
    Message,
    MessageMetadata,
    PromptCache,
    Request,
    Resolution,
    Response,
    StreamEvent,
    TextEvent,
    ThinkingObservation,
    Tool,
    ToolCall,
    ToolCallDelta,
    TypedStreamEvent,
    Usage,
)

__version__ = "0.1.0"

__all__ = [
    "EFFORT_ORDER",
    "PROVIDERS",
    "AuthError",
    "Capability",
    "Client",
    "ClientClosedError",
    "ContextWindowExceededError",
    "Cost",
    "DoneEvent",
    "Effort",
    "Message",
    "MessageMetadata",
    "PolythinkError",
    "PromptCache",
    "ProviderProfile",
    "RateLimitedError",
    "Request",
    "RequestRejectedError",
    "RequestTimeoutError",
    "Resolution",
    "Response",
    "Source",
    "StreamEvent",
    "StreamInterruptedError",
    "TextEvent",
    "ThinkingObservation",
    "ThinkingUnsupportedError",
    "Timeout",
    "Tool",
    "ToolCall",
    "ToolCallDelta",
    "TransientError",
    "TypedStreamEvent",
    "Usage",
    "__version__",
    "compact",
    "get_capability",
    "register_capability",
    "register_provider",
    "resolve",
    "should_compact",
]
