"""``polythink resolve --provider P --model M --effort E``: print the applied tier and the
request-body fragment a client would send, without any network.

The fragment is for the profile the client's source would use (a ``bedrock`` source of an
OpenAI model sends Converse, a ``vertex`` source of Claude ``rawPredict``:
:func:`polythink.reasoning.serving.serving`; ``--base-model M`` as ``Source.base_model``), and
for the Responses API where an ``openai`` or ``azure`` source would send a call with
``--tools`` there. The capability comes from the same store lookup the client makes
(:meth:`polythink.capability_store.CapabilityStore.resolve`; ``--store PATH``), with what was
observed at the endpoint ``--base-url URL`` (default: the provider's own). ``--budget
USD/WINDOW`` (with ``--step-down-at``, ``--floor``, ``--tag``, ``--budget-name`` and ``--spent
USD``, or ``--limits redis://…`` to read what the budget spent in the shared limits) shows the
tier a call would get now under that budget and why, as :meth:`polythink.Client.plan` does.
Exit 1 when the tier cannot be satisfied.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from polythink.backends.local import LocalBudgets
from polythink.budgets import Budget, nanos
from polythink.capability_store import open_store, resolve_known
from polythink.cli import arguments
from polythink.cli.arguments import Commands, Parser
from polythink.cli.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, error_message
from polythink.client import Client
from polythink.config import Source
from polythink.providers import PROVIDERS, get_provider
from polythink.reasoning import POLICIES
from polythink.reasoning.lifecycle import served_lifecycle_note
from polythink.reasoning.serving import serving
from polythink.types import Tool

__all__ = ["add_parser"]

_ANY_TOOL = Tool(name="tool")
"""What ``--tools`` plans a call with: only whether the call has function tools matters."""


def add_parser(commands: Commands) -> Parser:
    """Add ``polythink resolve`` to ``commands``."""
    providers = list(PROVIDERS)
    listing = ", ".join(providers)
    res = commands.add_parser(
        "resolve",
        help="print the applied tier and the request fragment for a model (no network)",
        description="Resolve a requested tier for a model: print the applied tier and the "
        "exact JSON fragment that would be sent, with what the capability store learned or "
        "imported (as the client reads it). Exit 1 when it cannot be satisfied.",
    )
    res.add_argument("--provider", required=True, choices=providers, metavar="P", help=listing)
    res.add_argument(
        "--model", required=True, type=arguments.model_id, metavar="M", help="model id"
    )
    res.add_argument(
        "--base-model",
        type=arguments.model_id,
        metavar="M",
        help="the model --model runs when its id does not say (an Azure deployment, a Bedrock "
        "application inference profile), as Source(base_model=...)",
    )
    res.add_argument(
        "--effort",
        required=True,
        type=arguments.effort,
        metavar="E",
        help="none, minimal, low, medium, high, xhigh, max or auto (aliases: off, on, true, false)",
    )
    res.add_argument(
        "--max-tokens",
        type=arguments.positive_int,
        metavar="N",
        help="the caller's output ceiling in tokens (budget wires raise it)",
    )
    res.add_argument(
        "--tools",
        action="store_true",
        help="the call carries function tools (a model that takes them on the Responses API "
        "only is sent there by an openai or azure source)",
    )
    res.add_argument(
        "--policy",
        choices=POLICIES,
        default="nearest",
        help="for a tier the model does not accept (default: nearest)",
    )
    res.add_argument(
        "--base-url",
        type=arguments.url_root,
        metavar="URL",
        help="the source's base URL: what was observed at this endpoint applies (default: "
        "the provider's own)",
    )
    res.add_argument("--json", action="store_true", help="print one JSON object")
    spend = res.add_argument_group(
        "spend budget",
        "what tier a call would get now under a budget (Budget(...) of polythink), and why",
    )
    spend.add_argument(
        "--budget",
        type=arguments.budget_spec,
        metavar="USD/WINDOW",
        help="a budget such as 10/day (windows: minute, hour, day, month, UTC)",
    )
    spend.add_argument(
        "--step-down-at",
        type=arguments.fraction,
        metavar="F",
        help="the fraction spent from which the budget steps tiers down (e.g. 0.8)",
    )
    spend.add_argument(
        "--flex-at",
        type=arguments.fraction,
        metavar="F",
        help="the fraction spent from which the budget moves calls to the flex service tier "
        "(e.g. 0.9, above --step-down-at)",
    )
    spend.add_argument(
        "--floor", type=arguments.effort, metavar="E", help="the cheapest tier to step to"
    )
    spend.add_argument(
        "--tag",
        metavar="T",
        help="the call's tag: the budget counts each tag apart (Budget(tag='*'))",
    )
    spend.add_argument(
        "--budget-name", metavar="NAME", help="the budget's name (default: the window and scope)"
    )
    spent = spend.add_mutually_exclusive_group()
    spent.add_argument(
        "--spent",
        type=arguments.dollars,
        metavar="USD",
        help="what the budget has spent in its current window (default 0)",
    )
    spent.add_argument(
        "--limits",
        metavar="URL",
        help="read what the budget has spent from the shared limits at a redis:// URL",
    )
    res.add_argument(
        "--store",
        metavar="PATH",
        help="the capability store file, read as the client reads it (default: "
        "$POLYTHINK_CAPABILITIES, else capabilities.json in the user cache directory)",
    )
    res.set_defaults(handler=_cmd_resolve)
    return res


def _cmd_resolve(args: argparse.Namespace) -> int:
    if args.budget is not None:
        return _resolve_under_budget(args)
    if any(
        getattr(args, name) is not None
        for name in ("step_down_at", "flex_at", "floor", "tag", "budget_name", "spent", "limits")
    ):
        print(
            "polythink resolve: error: --step-down-at, --flex-at, --floor, --tag, --budget-name, "
            "--spent and --limits describe a budget: give it with --budget USD/WINDOW",
            file=sys.stderr,
        )
        return EXIT_USAGE
    retired: str | None = None
    try:
        # The profile and the lookup a Client's source gets (a cloud serves some vendors
        # over another wire), then observed > documented > imported > inferred.
        store = open_store(args.store)
        served = serving(args.provider, args.model, args.base_model)
        known = store.lookup(served.lookup_provider, served.model, args.base_url)
        # A retired model is named as the client names it on its first call, whatever form
        # of its id was given (a Bedrock, Vertex or dated id finds the same entry).
        retired = served_lifecycle_note(
            served.model, known.capability, store.today(), served.profile.serves
        )
        resolution = resolve_known(
            args.effort,
            provider=served.profile,
            model=args.model,
            base_model=args.base_model,
            known=known,
            policy=args.policy,
            max_tokens=args.max_tokens,
            tools=args.tools,
        )
    except ValueError as exc:
        if args.json:
            error = {"type": type(exc).__name__, "message": error_message(exc)}
            out: dict[str, Any] = {"error": error}
            if retired is not None:
                out["warnings"] = [retired]
            print(json.dumps(out, ensure_ascii=False))
        else:
            if retired is not None:
                print(f"warning    {retired}", file=sys.stderr)
            print(f"polythink resolve: {type(exc).__name__}: {error_message(exc)}", file=sys.stderr)
        return EXIT_FAILED
    requested = resolution.requested_effort
    applied = resolution.applied_effort
    warnings = [*([retired] if retired is not None else []), *resolution.warnings]
    if args.json:
        result = {
            "requested_effort": requested.value if requested else None,
            "applied_effort": applied.value if applied else None,
            "payload": resolution.payload,
            "warnings": warnings,
        }
        print(json.dumps(result, ensure_ascii=False))
        return EXIT_OK
    print(f"requested  {requested.value if requested else 'unset'}")
    print(f"applied    {applied.value if applied else 'unset'}")
    print(f"payload    {json.dumps(resolution.payload, ensure_ascii=False)}")
    if served.profile is not get_provider(args.provider):
        print(f"served by  {served.profile.id}")
    if resolution.budget_tokens is not None:
        print(f"budget     {resolution.budget_tokens} tokens")
    for warning in warnings:
        print(f"warning    {warning}")
    return EXIT_OK


def _resolve_under_budget(args: argparse.Namespace) -> int:
    """``resolve --budget``: the client's own plan for one source under one budget."""
    usd, per = args.budget
    try:
        budget = Budget(
            usd,
            per,
            tag="*" if args.tag is not None else None,
            step_down_at=args.step_down_at,
            flex_at=args.flex_at,
            floor=args.floor,
            name=args.budget_name,
        )
        source = Source(
            args.provider,
            args.model,
            base_model=args.base_model,
            api_key="resolve",
            base_url=args.base_url,
            effort_fallback=args.policy,
        )
        store = None if args.limits else LocalBudgets()
        client = Client(
            [source],
            budgets=[budget],
            limits=args.limits,
            budget_store=store,
            capabilities_store=open_store(args.store),
        )
    except ValueError as exc:
        print(f"polythink resolve: ValueError: {error_message(exc)}", file=sys.stderr)
        return EXIT_USAGE

    async def plan() -> Any:
        try:
            if store is not None and args.spent:
                line = budget.line(args.tag if args.tag is not None else "all")
                await store.reserve([line], nanos(args.spent))
            (found,) = await client.plan(
                reasoning_effort=args.effort,
                max_tokens=args.max_tokens,
                tag=args.tag,
                tools=[_ANY_TOOL] if args.tools else None,
            )
            return found
        finally:
            await client.aclose()

    found = asyncio.run(plan())
    if args.json:
        print(json.dumps(_plan_json(found), ensure_ascii=False))
        return EXIT_OK if found.applied is not None else EXIT_FAILED
    requested, applied = found.requested, found.applied
    print(f"requested  {requested.value if requested else 'unset'}")
    print(f"applied    {applied.value if applied else '-'}")
    print(f"payload    {json.dumps(found.payload, ensure_ascii=False)}")
    if found.step_down is not None and found.step_down.max_tokens is not None:
        print(f"max_tokens {found.max_tokens} (the output ceiling shrinks with the tier)")
    if found.service_tier is not None:
        print(f"service    {found.service_tier.value}")
    for state in found.budgets:
        reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(state.resets_at))
        steps = (
            f", steps down from {state.step_down_at:.0%}" if state.step_down_at is not None else ""
        )
        if state.flex_at is not None:
            steps += f", moves calls to flex from {state.flex_at:.0%}"
        spent = (
            f"${state.spent:.6f} of ${state.limit:g} a {state.window} spent ({state.fraction:.1%})"
            if state.known
            else f"${state.limit:g} a {state.window}, spent unknown (Redis does not answer)"
        )
        print(f"budget     {state.budget!r} ({state.scope}): {spent}{steps}; resets {reset}")
    worst = "unpriced" if found.worst_case is None else f"${found.worst_case:.6f}"
    print(f"worst case {worst} ({'fits' if found.fits else 'does not fit'})")
    for reason in found.reasons:
        print(f"why        {reason}")
    return EXIT_OK if found.applied is not None else EXIT_FAILED


def _plan_json(found: Any) -> dict[str, Any]:
    step = found.step_down
    return {
        "requested_effort": found.requested.value if found.requested else None,
        "applied_effort": found.applied.value if found.applied else None,
        "payload": found.payload,
        "max_tokens": found.max_tokens,
        "service_tier": found.service_tier.value if found.service_tier else None,
        "step_down": None
        if step is None
        else {
            "requested": step.requested.value if step.requested else None,
            "applied": step.applied.value if step.applied else None,
            "budget": step.budget,
            "spent": step.spent,
            "step_down_at": step.step_down_at,
            "max_tokens": step.max_tokens,
            "service_tier": step.service_tier.value if step.service_tier else None,
            "flex_at": step.flex_at,
        },
        "budgets": [
            {
                "budget": state.budget,
                "scope": state.scope,
                "window": state.window,
                "limit": state.limit,
                "spent": round(state.spent, 9),
                "remaining": round(state.remaining, 9),
                "resets_at": state.resets_at,
            }
            for state in found.budgets
        ],
        "worst_case": found.worst_case,
        "fits": found.fits,
        "reasons": list(found.reasons),
    }
