"""Price a call from its :class:`~polythink.types.Usage`: the provider's billed figure when it
reports one, else the maintained ``genai-prices`` table.

Pure: no I/O, no clock of its own beyond the table's date rules. ``genai-prices`` (pydantic's,
MIT; the optional extra ``polythink[cost]``) is imported on the first call that needs a price;
without it every table price is ``None`` and one log line says how to install it.

Facts used (``genai-prices`` 0.2.3, read from its code 2026-12-01):

- prices are USD per million tokens (``*_mtok``), or :class:`TieredPrices` whose tier is
  picked by the call's whole input (a tier applies to every token once crossed);
- ``input_tokens`` must include cached tokens: a priced cache read or cache write is taken out
  of the input count and priced on its own, an unpriced one stays in the input;
- reasoning tokens are part of the output; a model with ``output_reasoning_mtok`` prices them
  apart from the rest of the output, every other model at the output price;
- the 1-hour cache writes (``Usage.cache_write_1h_tokens``, a part of the cache writes) are
  priced at ``cache_write_1h_mtok`` (2x input on Anthropic, against 1.25x for the 5-minute
  ``cache_write_mtok``);
- ``requests_kcount`` is a fee per thousand requests (one per call).

A model id in a cloud's form (a Bedrock inference profile, an ARN) that the table does not
know is priced as the native model it names. The model -> price lookup walks the table (tens
of microseconds to milliseconds); it is done once per (provider, model) and kept. Pricing one
call is then a few ``Decimal`` multiplications. A model whose price depends on the time of
day (DeepSeek's off-peak hours) or on a service tier keeps its lookup and picks the price for
each call's time.

Service tiers and batches (``genai-prices`` 0.2.5, read from its data 2026-12-04): a model's
``price_variants`` carry the prices of a tier (``{"service_tier": "flex"}``, ``"priority"``,
OpenAI's ``"default"``) and of its batch API (``{"processing": "batch"}``). A call is priced at
the tier that served it (:attr:`Response.service_tier`, else the tier sent); where the table
has no price for that tier, the provider's documented relation stands in, and where there is
none it says so (:func:`tier_price_note`):

- flex: OpenAI bills it "at Batch API rates" (developers.openai.com/api/docs/guides/
  flex-processing), the Gemini API at 50 % off, as its batches (ai.google.dev/gemini-api/docs/
  flex-inference): their batch prices; Groq at on-demand prices (console.groq.com/docs/
  flex-processing); elsewhere the standard price, an upper bound (noted);
- priority: only the table's price; without one the call has no price (``None``, noted), since
  the premium differs by model;
- batch: the table's batch price, else half the standard price where the provider documents a
  flat 50 % (OpenAI: developers.openai.com/api/docs/guides/batch; Anthropic: "50% of standard
  API prices", platform.claude.com/docs/en/build-with-claude/batch-processing; Gemini: "50% of
  the standard cost", ai.google.dev/gemini-api/docs/batch-mode; all as cited in
  CONTINUITY.md §4 and the pages' stored copies, read 2026-12-04).

OpenRouter reports what it billed in ``usage.cost`` with ``usage.cost_details``
(``upstream_inference_prompt_cost`` / ``_completions_cost`` on Chat Completions,
``upstream_inference_input_cost`` / ``_output_cost`` on Responses; recorded in
``fixtures/real/pai_openrouter_chat_reasoning_details_stream.yaml`` and
``pai_openrouter_responses_reasoning_text_stream.yaml``, 2025-12; WIRE.md §5.4).
:func:`reported_cost` reads it; that figure wins over any table.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, TypeGuard

from polythink.reasoning.ids import parse_model_id
from polythink.types import Cost, Usage

__all__ = [
    "PRICE_TABLE_FALLBACKS",
    "PRICE_TABLE_PROVIDERS",
    "price",
    "price_nanos",
    "price_table_version",
    "reported_cost",
    "tier_price_note",
    "worst_case_nanos",
]

PRICE_TABLE_PROVIDERS: dict[str, str] = {
    "openai": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "gemini": "google",
    "openrouter": "openrouter",
    "openrouter-responses": "openrouter",
    "deepseek": "deepseek",
    "glm": "zhipuai",
    "kimi": "moonshotai",
    "minimax": "minimax",
    "xai": "x-ai",
    "groq": "groq",
    "mistral": "mistral",
    "bedrock": "aws",
    "bedrock-converse": "aws",
    "vertex": "google",
    "vertex-anthropic": "google",
    "azure": "azure",
    "azure-responses": "azure",
}
"""polythink provider id -> ``genai-prices`` provider id. Providers not listed (``qwen``,
self-hosted ``vllm`` and ``ollama``) have no table price: their cost is ``None``.

The clouds, as the table has them (genai-prices 0.2.5, read 2026-12-04):

- ``aws`` (Bedrock) prices cross-region (``global.``) and regional (``us.``, ``eu.`` …, and
  the bare in-region id) profiles apart, regional ones 10% higher for the models Anthropic and
  AWS price so (``global.anthropic.claude-opus-4-8`` $5/$25 per MTok,
  ``us.anthropic.claude-opus-4-8`` $5.50/$27.50): a Bedrock call is priced by the id it was
  sent to (``ProviderProfile.price_by_id``).
- ``google`` (Vertex) has one price per model: the ``global`` endpoint's. Vertex charges
  regional and multi-region endpoints 10% more for Claude Sonnet 4.5 and later
  (platform.claude.com "Claude on Vertex AI", CLOUDS.md §2.3); the table does not say so, and
  neither does the cost of such a call here.
- ``azure`` lists few models (o-series, Phi, embeddings); a model it lacks is priced at
  OpenAI's list price (:data:`PRICE_TABLE_FALLBACKS`), the Global Standard deployment's.
  Data Zone and Regional deployments cost more; the table has no such prices."""

PRICE_TABLE_FALLBACKS: dict[str, str] = {"azure": "openai"}
"""``genai-prices`` provider -> the one whose price a model it does not list is given."""

_TIER_CONTEXT: dict[str, dict[str, str]] = {
    "openai": {"flex": "flex", "priority": "priority", "ultrafast": "ultrafast"},
    "google": {"flex": "flex", "priority": "priority"},
}
"""``genai-prices`` provider -> polythink's tier -> the ``service_tier`` price context it is
priced under (OpenAI's ``fast`` is reported as ``priority`` and priced the same)."""
_FLEX_AT_BATCH_RATES = frozenset({"openai", "google"})
_FLEX_AT_STANDARD_RATES = frozenset({"groq"})
_BATCH_DISCOUNT: dict[str, Decimal] = {
    "openai": Decimal("0.5"),
    "anthropic": Decimal("0.5"),
    "google": Decimal("0.5"),
}
"""Providers whose batch API is documented at a flat share of the standard price."""
_BATCH = "batch"
_ONE = Decimal(1)

_log = logging.getLogger("polythink.pricing")
_MILLION = Decimal(1_000_000)
_THOUSAND = Decimal(1000)
_NANO = Decimal(1_000_000_000)
_ZERO = Decimal(0)
# Price keys whose usage count polythink never reports (searches, modalities, per-hour audio):
# they price nothing here and take nothing out of the token counts that are reported.
_PRICED_HERE = frozenset(
    {
        "input_mtok",
        "cache_read_mtok",
        "cache_write_mtok",
        "cache_write_1h_mtok",
        "output_mtok",
        "output_reasoning_mtok",
        "requests_kcount",
    }
)
_UNREPORTED_PREFIXES = (
    "web_searches",
    "storage_searches",
    "social_searches",
    "code_executions",
    "rerank_searches",
)
_UNREPORTED_WORDS = ("audio", "image", "video", "document", "mchars", "gpixels")
_LOOKUP_LIMIT = 4096


class _Rates:
    """The prices of one ``ModelPrice`` that polythink's counts can use (``None``: unpriced):
    a plain price per million tokens is kept per token (divided once, exactly: a decimal
    division by 10**6 moves the exponent), a tiered one as it is."""

    __slots__ = (
        "cache_read",
        "cache_write",
        "cache_write_1h",
        "fee",
        "input",
        "output",
        "reasoning",
    )

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.input = _per_token(values.get("input_mtok"))
        self.cache_read = _per_token(values.get("cache_read_mtok"))
        self.cache_write = _per_token(values.get("cache_write_mtok"))
        self.cache_write_1h = _per_token(values.get("cache_write_1h_mtok"))
        self.output = _per_token(values.get("output_mtok"))
        self.reasoning = _per_token(values.get("output_reasoning_mtok"))
        self.fee = values.get("requests_kcount")

    @classmethod
    def of(cls, prices: Any) -> _Rates | None:
        """The rates of ``prices``, or ``None`` when it charges a unit not priced here."""
        values = prices.__dict__
        for key, value in values.items():
            if value is not None and key not in _PRICED_HERE and not _unreported_unit(key):
                return None
        return cls(values)


class _Entry:
    """One (provider, model) of the table: its rates, or the model when they vary by date."""

    __slots__ = ("info", "rates")

    def __init__(self, info: Any, rates: _Rates | None) -> None:
        self.info = info
        self.rates = rates


class _Table:
    """The ``genai-prices`` module and what was looked up in it, loaded on first use."""

    def __init__(self) -> None:
        self.loaded = False
        self.module: Any = None
        self.model_price: Any = None
        self.tiered: Any = None
        self.version = ""
        self.lookups: dict[tuple[str, str], _Entry | None] = {}

    def load(self) -> bool:
        if not self.loaded:
            self.loaded = True
            try:
                import genai_prices
                from genai_prices.types import ModelPrice, TieredPrices
            except ImportError:
                _log.warning(
                    "Response.cost is None: the price table is not installed; "
                    "pip install 'polythink[cost]' (genai-prices) to price calls"
                )
                return False
            self.module = genai_prices
            self.model_price = ModelPrice
            self.tiered = TieredPrices
            self.version = f"genai-prices {genai_prices.__version__}"
        return self.module is not None

    def entry(self, provider: str, model: str) -> _Entry | None:
        """The table's entry for (provider, model), or ``None``; looked up once per pair."""
        key = (provider, model)
        if key in self.lookups:
            return self.lookups[key]
        from genai_prices import data_snapshot

        snapshot = data_snapshot.get_snapshot()
        found: _Entry | None = None
        for name in _names(model):
            try:
                _, info = snapshot.find_provider_model(name, None, provider, None)
            except LookupError:
                continue
            plain = isinstance(info.prices, self.model_price)
            found = _Entry(info, _Rates.of(info.prices) if plain else None)
            break
        if len(self.lookups) >= _LOOKUP_LIMIT:
            self.lookups.clear()
        self.lookups[key] = found
        return found


_table = _Table()


def _names(model: str) -> tuple[str, ...]:
    """The names a price is looked up by: the model as given, then the native id it names
    (:func:`polythink.reasoning.ids.parse_model_id`: a Bedrock ``us.anthropic.…-v1:0`` id or
    an ARN is priced as the Anthropic model). A fine-tune is never priced as its base model
    (fine-tuned models have prices of their own), nor an id that names no model."""
    parsed = parse_model_id(None, model)
    if not parsed.inferable or parsed.fine_tune is not None or parsed.model == model:
        return (model,)
    return (model, parsed.model)


def price_table_version() -> str | None:
    """``"genai-prices X.Y.Z"`` when the price table is installed, else ``None``."""
    return _table.version if _table.load() else None


def price(
    usage: Usage | None,
    provider: str,
    model: str,
    *,
    at: datetime | None = None,
    service_tier: str | None = None,
    batch: bool = False,
) -> Cost | None:
    """Price ``usage`` of one call to ``model`` at ``provider`` from the price table.

    Args:
        usage: the call's tokens (``input_tokens`` with cached tokens included, as
            :class:`~polythink.types.Usage` holds them).
        provider: the polythink provider id (see :data:`PRICE_TABLE_PROVIDERS`).
        model: the model name (the one the server reported, or the source's).
        at: when the call was made, for prices that change over time (``None``: now).
        service_tier: the tier that served the call (``flex``, ``standard``, ``priority``,
            ``batch``, or a provider's own such as ``ultrafast``); ``None``: standard.
        batch: the call ran in a batch (priced at batch rates, whatever ``service_tier``).

    Returns:
        The cost in US dollars with ``source`` naming the table and its version; ``None``
        when usage or its input or output count is missing, the provider or model is not in
        the table, the model's price uses a unit this function does not price, the tier has
        no price (see the module docstring), or the table is not installed. Never a made-up
        0.
    """
    if usage is None or usage.input_tokens is None or usage.output_tokens is None:
        return None
    found = _priced(provider, model, at, service_tier, batch)
    if found is None:
        return None
    rates, share = found
    parts = _parts(rates, usage, share)
    return None if parts is None else _cost(rates, usage, parts)


def price_nanos(
    usage: Usage | None,
    provider: str,
    model: str,
    *,
    at: datetime | None = None,
    service_tier: str | None = None,
    batch: bool = False,
) -> int | None:
    """Price ``usage`` as :func:`price` does, in whole nano-dollars (10⁻⁹ USD) rounded up
    from the table's exact decimal figure; ``None`` where :func:`price` gives ``None``."""
    if usage is None or usage.input_tokens is None or usage.output_tokens is None:
        return None
    found = _priced(provider, model, at, service_tier, batch)
    parts = None if found is None else _parts(found[0], usage, found[1])
    return None if parts is None else _in_nanos(parts[-1])


def worst_case_nanos(
    provider: str,
    model: str,
    input_tokens: int,
    output_tokens: int,
    *,
    cache_write: bool = False,
    cache_write_1h: bool = False,
    at: datetime | None = None,
    service_tier: str | None = None,
    batch: bool = False,
) -> int | None:
    """The most a call of ``input_tokens`` prompt tokens and ``output_tokens`` output tokens
    can cost, in whole nano-dollars rounded up; ``None`` when the model has no price here.

    The output is priced as output, reasoning included: at the reasoning price where the
    table has one above the output price. With ``cache_write`` (the call marks a prompt
    cache prefix) the prompt is priced as cache writes where those cost more than input;
    with ``cache_write_1h`` too (a 1-hour marker), as 1-hour writes. ``service_tier`` and
    ``batch`` price it as :func:`price` does.
    """
    found = _priced(provider, model, at, service_tier, batch)
    if found is None:
        return None
    rates, share = found
    most: Decimal | None = None
    for reasoning in {0, output_tokens if rates.reasoning is not None else 0}:
        for written in {0, input_tokens if cache_write else 0}:
            usage = Usage(
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                reasoning_tokens=reasoning,
                cache_write_tokens=written,
                cache_write_1h_tokens=written if cache_write_1h else None,
            )
            parts = _parts(rates, usage, share)
            if parts is not None and (most is None or parts[-1] > most):
                most = parts[-1]
    return None if most is None else _in_nanos(most)


def tier_price_note(
    provider: str,
    model: str,
    service_tier: str | None,
    *,
    batch: bool = False,
    at: datetime | None = None,
) -> str | None:
    """Say how a call served at ``service_tier`` (or in a batch) is priced when the table
    has no price of its own for it; ``None`` when it has one, or the call is standard."""
    found = _entry_of(provider, model)
    if found is None:
        return None
    table_provider, entry = found
    when = at or datetime.now(tz=UTC)
    if batch or service_tier == _BATCH:
        if _variant(entry, {"processing": _BATCH}, when) or table_provider not in _BATCH_DISCOUNT:
            return None
        share = _BATCH_DISCOUNT[table_provider]
        return (
            f"the price table has no batch price for {provider} model {model!r}: priced at "
            f"{share:%} of its standard price, as {provider} documents for its batches"
        )
    context = _TIER_CONTEXT.get(table_provider, {}).get(service_tier or "")
    if service_tier in (None, "standard", "auto") or (
        context is not None and _variant(entry, {"service_tier": context}, when)
    ):
        return None
    if service_tier == "flex":
        if table_provider in _FLEX_AT_BATCH_RATES:
            return (
                f"the price table has no flex price for {provider} model {model!r}: priced at "
                f"its batch price, as {provider} bills flex"
            )
        if table_provider in _FLEX_AT_STANDARD_RATES:
            return None
        return (
            f"the price table has no flex price for {provider} model {model!r}: priced at "
            "its standard price, an upper bound"
        )
    return (
        f"the price table has no {service_tier} price for {provider} model {model!r}: the "
        "call's cost is not known (Response.cost is None)"
    )


def _entry_of(provider: str, model: str) -> tuple[str, _Entry] | None:
    """The table's provider id and entry for (provider, model), or ``None``."""
    table_provider = PRICE_TABLE_PROVIDERS.get(provider)
    if table_provider is None or not _table.load():
        return None
    entry = _table.entry(table_provider, model)
    return None if entry is None else (table_provider, entry)


def _variant(entry: _Entry, when: Mapping[str, str], at: datetime) -> bool:
    """Whether the table prices ``entry``'s model under the price context ``when`` at ``at``."""
    for variant in entry.info.price_variants or ():
        if variant.when == when and (variant.constraint is None or variant.constraint.active(at)):
            return True
    return False


def _priced(
    provider: str, model: str, at: datetime | None, tier: str | None, batch: bool
) -> tuple[_Rates, Decimal] | None:
    """The rates of (provider, model) at ``at`` for a call served at ``tier`` (or in a batch),
    and the share of them billed (1, or the documented batch share); ``None`` when it has no
    price (see the module docstring)."""
    if tier in (None, "standard", "auto") and not batch:
        rates = _rates(provider, model, at)
        return None if rates is None else (rates, _ONE)
    found = _entry_of(provider, model)
    if found is None:
        return None
    table_provider, entry = found
    when = at or datetime.now(tz=UTC)
    if batch or tier == _BATCH:
        return _context_rates(entry, {"processing": _BATCH}, when, table_provider)
    context = _TIER_CONTEXT.get(table_provider, {}).get(tier or "")
    if context is not None and _variant(entry, {"service_tier": context}, when):
        rates = _Rates.of(entry.info.get_prices(when, {"service_tier": context}))
        return None if rates is None else (rates, _ONE)
    if tier == "flex":
        if table_provider in _FLEX_AT_BATCH_RATES:
            return _context_rates(entry, {"processing": _BATCH}, when, table_provider)
        rates = _rates(provider, model, at)
        return None if rates is None else (rates, _ONE)
    return None


def _context_rates(
    entry: _Entry, context: dict[str, str], at: datetime, table_provider: str
) -> tuple[_Rates, Decimal] | None:
    """The batch rates of ``entry``: the table's own, else the standard ones at the
    provider's documented batch share."""
    if _variant(entry, context, at):
        rates = _Rates.of(entry.info.get_prices(at, context))
        return None if rates is None else (rates, _ONE)
    share = _BATCH_DISCOUNT.get(table_provider)
    if share is None:
        return None
    rates = entry.rates or _Rates.of(entry.info.get_prices(at))
    return None if rates is None else (rates, share)


def _in_nanos(total: Decimal) -> int:
    return math.ceil(total * _NANO)


def _rates(provider: str, model: str, at: datetime | None) -> _Rates | None:
    """The rates of (provider, model) at ``at`` (``None``: now), or ``None`` when unpriced."""
    table_provider = PRICE_TABLE_PROVIDERS.get(provider)
    if table_provider is None or not _table.load():
        return None
    entry = _table.entry(table_provider, model)
    fallback = PRICE_TABLE_FALLBACKS.get(table_provider)
    if entry is None and fallback is not None:
        entry = _table.entry(fallback, model)
    if entry is None:
        return None
    rates = entry.rates
    if rates is None:
        if isinstance(entry.info.prices, _table.model_price):
            return None  # a plain price with a unit not priced here
        rates = _Rates.of(entry.info.get_prices(at or datetime.now(tz=UTC)))
    return rates


_Parts = tuple[Decimal, Decimal, Decimal, Decimal, Decimal, Decimal]


def _parts(rates: _Rates, usage: Usage, share: Decimal = _ONE) -> _Parts | None:
    """(input, cache read, cache write, output, reasoning, total) of ``usage`` in USD, each
    at ``share`` of the rates (a batch discount the table does not carry)."""
    input_tokens = usage.input_tokens or 0
    output_tokens = usage.output_tokens or 0
    cache_read = usage.cache_read_tokens or 0
    cache_write = usage.cache_write_tokens or 0
    hour = usage.cache_write_1h_tokens or 0
    reasoning = usage.reasoning_tokens or 0
    if hour and rates.cache_write is not None and rates.cache_write_1h is None:
        return None  # 1-hour writes the table does not price: their cost is not known
    # A cache count the table prices on its own comes out of the input count; one it does
    # not price stays in the input, at the input price.
    uncached = input_tokens
    if rates.cache_read is not None:
        uncached -= cache_read
    if rates.cache_write is not None:
        uncached -= cache_write
    if uncached < 0 or reasoning > output_tokens or hour > cache_write:
        return None
    part_input = _part(rates.input, uncached, input_tokens)
    part_read = _part(rates.cache_read, cache_read, input_tokens)
    part_write = _part(rates.cache_write, cache_write - hour, input_tokens) + _part(
        rates.cache_write_1h, hour, input_tokens
    )
    if rates.reasoning is not None:
        part_reasoning = _part(rates.reasoning, reasoning, input_tokens)
        part_output = _part(rates.output, output_tokens - reasoning, input_tokens)
        part_output += part_reasoning
    else:
        part_reasoning = _part(rates.output, reasoning, input_tokens)
        part_output = _part(rates.output, output_tokens, input_tokens)
    if share != _ONE:
        part_input *= share
        part_read *= share
        part_write *= share
        part_output *= share
        part_reasoning *= share
    total = part_input + part_read + part_write + part_output
    if rates.fee is not None:
        total += rates.fee / _THOUSAND
    return part_input, part_read, part_write, part_output, part_reasoning, total


def _cost(rates: _Rates, usage: Usage, parts: _Parts) -> Cost:
    part_input, part_read, part_write, part_output, part_reasoning, total = parts
    return Cost(
        total=float(total),
        input=float(part_input),
        cache_read=(
            float(part_read)
            if rates.cache_read is not None and usage.cache_read_tokens is not None
            else None
        ),
        cache_write=(
            float(part_write)
            if rates.cache_write is not None and usage.cache_write_tokens is not None
            else None
        ),
        output=float(part_output),
        reasoning=float(part_reasoning) if usage.reasoning_tokens is not None else None,
        source=_table.version,
    )


def _unreported_unit(key: str) -> bool:
    # Searches, tool runs, modality and duration units (audio, image, video, documents,
    # characters) count usage polythink never reports, so they price nothing here (and take
    # nothing out of the token counts).
    return key.startswith(_UNREPORTED_PREFIXES) or any(word in key for word in _UNREPORTED_WORDS)


def _per_token(price: Any) -> Any:
    """A plain price per million tokens as a price per token; a tiered price or ``None`` as
    it is."""
    if price is None or isinstance(price, _table.tiered):
        return price
    return Decimal(price) / _MILLION


def _part(price: Any, count: int, input_tokens: int) -> Decimal:
    if price is None or not count:
        return _ZERO
    if price.__class__ is Decimal:
        return price * count
    rate: Decimal = price.base
    for tier in reversed(price.tiers):
        if input_tokens > tier.start:
            rate = tier.price
            break
    return rate * Decimal(count) / _MILLION


def reported_cost(usage: Any) -> Cost | None:
    """Read the amount a provider billed from a wire ``usage`` object, or ``None``.

    OpenRouter's ``usage.cost`` (USD), split into ``input`` (the whole prompt, cached tokens
    included) and ``output`` when ``usage.cost_details`` gives the prompt and completion
    parts and they add up to the total; ``source`` is ``"provider"``.
    """
    if not isinstance(usage, Mapping):
        return None
    total = usage.get("cost")
    if not _amount(total):
        return None
    details = usage.get("cost_details")
    prompt: float | None = None
    completion: float | None = None
    if isinstance(details, Mapping):
        prompt = _first_amount(
            details, "upstream_inference_prompt_cost", "upstream_inference_input_cost"
        )
        completion = _first_amount(
            details, "upstream_inference_completions_cost", "upstream_inference_output_cost"
        )
        if (
            prompt is None
            or completion is None
            or not math.isclose(prompt + completion, total, rel_tol=1e-6, abs_tol=1e-12)
        ):
            prompt = completion = None
    return Cost(total=float(total), input=prompt, output=completion, source="provider")


def _first_amount(details: Mapping[str, Any], *keys: str) -> float | None:
    for key in keys:
        value = details.get(key)
        if _amount(value):
            return float(value)
    return None


def _amount(value: Any) -> TypeGuard[float]:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )
