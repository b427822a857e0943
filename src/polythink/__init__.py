"""polythink: an async LLM client with one reasoning-effort vocabulary across providers.

Quick start::

    from polythink import Client, Source

    async with Client(sources=[Source("openai", "gpt-5.5", reasoning_effort="high")]) as client:
        response = await client.complete([{"role": "user", "content": "hi"}])
        print(response.text, response.applied_effort, response.usage)
"""

from typing import TYPE_CHECKING, Any

from polythink.budgets import Budget, BudgetState, CallPlan
from polythink.client import Client
from polythink.config import ReadLimits, Source, Timeout
from polythink.conversation import compact, should_compact
from polythink.errors import (
    AuthError,
    BatchItemNotRunError,
    BudgetExceededError,
    CapacityUnavailableError,
    ClientClosedError,
    ClientLoopError,
    ConfigFileNotFoundError,
    ContentFilterError,
    ContentUnsupportedError,
    ContextWindowExceededError,
    InvalidInputError,
    MiddlewareError,
    ModelNotFoundError,
    OutputFormatUnsupportedError,
    OutputRefusedError,
    OutputTruncatedError,
    OutputValidationError,
    PolythinkError,
    RateLimitedError,
    RequestRejectedError,
    RequestTimeoutError,
    ResponseTooLargeError,
    ServiceTierUnsupportedError,
    StreamInterruptedError,
    ThinkingBindingError,
    ThinkingUnsupportedError,
    TransientError,
)
from polythink.middleware.base import CompleteNext, Middleware, Passthrough, StreamNext
from polythink.providers import PROVIDERS, ProviderProfile, register_provider
from polythink.reasoning.capabilities import get_capability, register_capability
from polythink.reasoning.capability import Capability
from polythink.reasoning.resolve import resolve
from polythink.structured import PartialJSON
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
    ResponseFormat,
    ServiceTier,
    StepDown,
    StreamEvent,
    TextEvent,
    ThinkingObservation,
    Tool,
    ToolCall,
    ToolCallDelta,
    TypedStreamEvent,
    Usage,
)

if TYPE_CHECKING:
    from polythink.batch import BatchJob, BatchStatus
    from polythink.sync import SyncClient

__version__ = "0.2.0"

__all__ = [
    "EFFORT_ORDER",
    "PROVIDERS",
    "AuthError",
    "BatchItemNotRunError",
    "BatchJob",
    "BatchStatus",
    "Budget",
    "BudgetExceededError",
    "BudgetState",
    "CallPlan",
    "Capability",
    "CapacityUnavailableError",
    "Client",
    "ClientClosedError",
    "ClientLoopError",
    "CompleteNext",
    "ConfigFileNotFoundError",
    "ContentFilterError",
    "ContentUnsupportedError",
    "ContextWindowExceededError",
    "Cost",
    "DoneEvent",
    "Effort",
    "InvalidInputError",
    "Message",
    "MessageMetadata",
    "Middleware",
    "MiddlewareError",
    "ModelNotFoundError",
    "OutputFormatUnsupportedError",
    "OutputRefusedError",
    "OutputTruncatedError",
    "OutputValidationError",
    "PartialJSON",
    "Passthrough",
    "PolythinkError",
    "PromptCache",
    "ProviderProfile",
    "RateLimitedError",
    "ReadLimits",
    "Request",
    "RequestRejectedError",
    "RequestTimeoutError",
    "Resolution",
    "Response",
    "ResponseFormat",
    "ResponseTooLargeError",
    "ServiceTier",
    "ServiceTierUnsupportedError",
    "Source",
    "StepDown",
    "StreamEvent",
    "StreamInterruptedError",
    "StreamNext",
    "SyncClient",
    "TextEvent",
    "ThinkingBindingError",
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


def __getattr__(name: str) -> Any:
    # The synchronous client loads anyio's thread machinery (about 18 ms), and batches the
    # price table's module: only when asked.
    if name == "SyncClient":
        from polythink.sync import SyncClient

        return SyncClient
    if name in ("BatchJob", "BatchStatus"):
        from polythink import batch

        return getattr(batch, name)
    raise AttributeError(f"module 'polythink' has no attribute {name!r}")
