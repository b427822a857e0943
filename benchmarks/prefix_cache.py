"""What a 100-turn agent loop pays for its input, per wire and per place of its per-call
instructions.

Run ``python -m benchmarks.prefix_cache`` (about 15 seconds; needs the ``cost`` extra for the
dollar figures). Against the simulator (in this process), each run is one tool loop of
``--turns`` calls (default 100) on one model: a stable system prompt of about 3,000 tokens
and one tool, a ``system_suffix`` that changes every call (the step, the files touched so
far), ``prompt_cache=True``, each answer a tool call whose result (about 150 tokens) is
appended with the answer. The simulator counts the cached tokens of each call from the
longest prefix it shares with the earlier calls, at each provider's granularity
(:mod:`polythink.simulator.prompt_cache`), and plays Anthropic's thinking-block binding on
an account created after 2026-08-31 (:mod:`polythink.simulator.binding`), or on an older
one, where a failed check lets the block through (the only way the old placement runs on
claude-opus-5-5; on claude-fable-5-2 it is refused on every account).

Per run, the place of the per-call instructions is set as data, through the registry
(``register_capability`` with ``per_call_instructions`` and ``clear_at``):

- ``system``: the system prompt edited every call, what polythink did before (main today);
- ``system_message``: a system message after the conversation (OpenAI, newest only) or a
  mid-conversation system message kept in place (Anthropic, with and without ``clear_at``);
- ``user_turn``: a user turn after the conversation (kept in place on Anthropic).

Reported per run: input tokens over the loop, the share read from the prompt cache, the
tokens written to it (Anthropic), and what the input cost in US dollars
(:attr:`polythink.Response.cost`, genai-prices), also as full-price input tokens (the cost
divided by the model's uncached input price). A run that an API refuses says at which call.
Results go to ``benchmarks/results/prefix_cache.json`` and a table on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import platform
import time
from pathlib import Path
from typing import Any

from polythink import Client, Message, Source, Tool
from polythink.errors import PolythinkError
from polythink.pricing import price
from polythink.reasoning.capabilities import get_capability, register_capability
from polythink.simulator import Settings, Simulator
from polythink.types import Usage

__all__ = ["RUNS", "main"]

RESULTS = Path(__file__).resolve().parent / "results" / "prefix_cache.json"

SYSTEM = "You are a careful coding agent working in a large repository. " + " ".join(
    f"Rule {n}: read a file before you change it, run the tests after, and say what you did."
    for n in range(130)
)
SHELL = Tool(
    name="shell",
    description="Run a shell command in the repository and return its output.",
    parameters={"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
)
RESULT = "\n".join(f"src/module_{n}.py: 120 lines, 3 functions, tests pass" for n in range(12))

QUESTION = "Fix the failing build in this repository."
"""The first six words are the suffix's too: the simulated reasoning grows with them."""

RUNS: tuple[tuple[str, str, str, bool, str], ...] = (
    # provider, model, placement, clear_at, label
    ("anthropic", "claude-opus-5-5", "system", False, "before"),
    ("anthropic", "claude-opus-5-5", "system", False, "before, older account"),
    ("anthropic", "claude-opus-5-5", "system_message", True, "after"),
    ("anthropic", "claude-opus-5-5", "system_message", False, ""),
    ("anthropic", "claude-opus-5-5", "user_turn", False, ""),
    ("anthropic", "claude-fable-5-2", "system", False, "before"),
    ("anthropic", "claude-fable-5-2", "user_turn", False, "after"),
    ("openai", "gpt-5.5", "system", False, "before"),
    ("openai", "gpt-5.5", "system_message", False, "after"),
    ("openai", "gpt-5.5", "user_turn", False, ""),
    ("openai-responses", "gpt-5.5", "system", False, "before"),
    ("openai-responses", "gpt-5.5", "system_message", False, "after"),
    ("gemini", "gemini-3.8-flash", "system", False, "before"),
    ("gemini", "gemini-3.8-flash", "user_turn", False, "after"),
    ("deepseek", "deepseek-v4-pro", "system", False, "before"),
    ("deepseek", "deepseek-v4-pro", "user_turn", False, "after"),
)
"""Every run: the model, where its per-call instructions go, and whether it is polythink's
choice for that model (``after``) or what it did before (``before``)."""


def suffix(step: int, turns: int) -> str:
    """The per-call instruction of call ``step``: it changes every call. It opens with the
    question's first six words, of which the simulator makes its reasoning text, so the
    reasoning a turn carries back is as long wherever the instruction goes."""
    touched = ", ".join(f"src/module_{n}.py" for n in range(step % 7))
    return (
        f"Fix the failing build in this plan: step {step + 1} of {turns}. Files touched so "
        f"far: {touched or 'none'}."
    )


async def loop(
    sim: Simulator, provider: str, model: str, turns: int
) -> tuple[list[Usage], list[Any], str | None]:
    """One agent loop; the usage and cost of each call, and the error that ended it early."""
    source = Source(
        provider,
        model,
        api_key="sim",
        base_url=sim.base_url(provider),
        headers={"x-sim-tool-rounds": str(turns + 1), "x-sim-answer-words": "4"},
    )
    messages = [Message(role="system", content=SYSTEM), Message(role="user", content=QUESTION)]
    usage: list[Usage] = []
    costs: list[Any] = []
    async with Client([source], capabilities_store=False, cache=None) as client:
        for step in range(turns):
            try:
                answer = await client.complete(
                    messages, tools=[SHELL], system_suffix=suffix(step, turns), prompt_cache=True
                )
            except PolythinkError as exc:
                return usage, costs, f"call {step + 1}: {type(exc).__name__} ({exc.status_code})"
            assert answer.usage is not None
            usage.append(answer.usage)
            costs.append(answer.cost)
            messages.append(answer.message)
            for call in answer.tool_calls:
                messages.append(Message(role="tool", tool_call_id=call.id, content=RESULT))
    return usage, costs, None


def summary(provider: str, model: str, usage: list[Usage], costs: list[Any]) -> dict[str, Any]:
    """The run's totals: tokens, the share from the cache, and the input's cost."""
    total = sum(u.input_tokens or 0 for u in usage)
    read = sum(u.cache_read_tokens or 0 for u in usage)
    written = sum(u.cache_write_tokens or 0 for u in usage)
    dollars = sum(
        float(c.input) + float(c.cache_read or 0) + float(c.cache_write or 0)
        for c in costs
        if c is not None
    )
    # The price of one uncached input token, below any long-context tier.
    base = price(Usage(input_tokens=1_000, output_tokens=0), provider, model)
    per_token = float(base.input) / 1_000 if base is not None else None
    return {
        "calls": len(usage),
        "input_tokens": total,
        "cache_read_tokens": read,
        "cache_write_tokens": written,
        "cached_share": round(read / total, 4) if total else 0.0,
        "input_usd": round(dollars, 4) if costs and all(c is not None for c in costs) else None,
        "paid_tokens": round(dollars / per_token) if per_token else None,
    }


async def run_all(turns: int) -> list[dict[str, Any]]:
    """Every run of :data:`RUNS`, each with a cold cache, the registry restored after."""
    results = []
    with Simulator(Settings(tool_rounds=turns + 1, answer_words=4)) as sim:
        for provider, model, placement, clear_at, label in RUNS:
            original = get_capability(model)
            assert original is not None
            register_capability(
                dataclasses.replace(original, per_call_instructions=placement, clear_at=clear_at)
            )
            sim.server.prompt_cache.clear()
            sim.settings.new_account = "older account" not in label
            started = time.perf_counter()
            try:
                usage, costs, stopped = await loop(sim, provider, model, turns)
            finally:
                register_capability(original)
                sim.settings.new_account = True
            row = {
                "provider": provider,
                "model": model,
                "placement": placement + (" + clear_at" if clear_at else ""),
                "label": label,
                "stopped": stopped,
                "seconds": round(time.perf_counter() - started, 2),
                **summary(provider, model, usage, costs),
            }
            results.append(row)
            print(_line(row), flush=True)
    return results


def _line(row: dict[str, Any]) -> str:
    usd = f"${row['input_usd']:.3f}" if row["input_usd"] is not None else "n/a"
    paid = f"{row['paid_tokens']:,}" if row["paid_tokens"] is not None else "n/a"
    stopped = f" (refused at {row['stopped']})" if row["stopped"] else ""
    return (
        f"| {row['provider']} {row['model']} | {row['placement']}"
        f"{' (' + row['label'] + ')' if row['label'] else ''} | {row['calls']} | "
        f"{row['input_tokens']:,} | {row['cached_share']:.1%} | {row['cache_write_tokens']:,} | "
        f"{paid} | {usd}{stopped} |"
    )


def main(argv: list[str] | None = None) -> None:
    """Run the scenario and write ``benchmarks/results/prefix_cache.json``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    print(
        "| wire, model | per-call instructions | calls | input tokens | from cache | "
        "written to cache | paid (full-price tokens) | input cost |"
    )
    print("|---|---|--:|--:|--:|--:|--:|--:|")
    results = asyncio.run(run_all(args.turns))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "turns": args.turns,
                "machine": platform.platform(),
                "python": platform.python_version(),
                "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "runs": results,
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
