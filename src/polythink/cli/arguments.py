"""The parser class every command shares, and the types of the arguments it reads.

Each type turns one argument's text into its value, or raises ``argparse.ArgumentTypeError``
saying what it expected and what it got; the parser makes that the one line printed before
exit 2.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import NoReturn, TypeAlias

from polythink.budgets import Budget
from polythink.types import EFFORT_ORDER, Effort

__all__ = [
    "BUDGET_SPEC",
    "Commands",
    "Parser",
    "UsageError",
    "budget_spec",
    "dollars",
    "effort",
    "fraction",
    "model_id",
    "port",
    "positive_days",
    "positive_int",
    "seconds",
    "url_root",
]


class UsageError(Exception):
    """A bad command line; its message is the one line printed before exit 2."""


class Parser(argparse.ArgumentParser):
    """The parser of ``polythink`` and of each command: a bad command line raises
    :class:`UsageError` instead of printing the usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: error: {message}")


def effort(value: str) -> Effort:
    try:
        parsed = Effort.parse(value)
    except ValueError:
        parsed = None
    if parsed is None:
        accepted = ", ".join(e.value for e in (*EFFORT_ORDER, Effort.AUTO))
        raise argparse.ArgumentTypeError(
            f"unknown reasoning effort {value!r}; accepted: {accepted} "
            "(aliases: off, on, true, false)"
        )
    return parsed


BUDGET_SPEC = (
    "a positive amount of US dollars per window such as 10/day (windows: minute, hour, day, "
    "month, UTC)"
)
"""What ``--budget`` accepts, as its error messages say it."""


def budget_spec(value: str) -> tuple[float, str]:
    usd, _, per = value.partition("/")
    try:
        amount = float(usd)
        Budget(amount, per)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {BUDGET_SPEC}, got {value!r}") from None
    return amount, per


def fraction(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not 0 <= number < 1:
        raise argparse.ArgumentTypeError(
            f"expected a fraction from 0 to below 1 such as 0.8 (= 80 % spent), got {value!r}"
        )
    return number


def positive_days(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number of days >= 0, got {value!r}")
    return number


def model_id(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError(f"expected a model id such as gpt-5.5, got {value!r}")
    return value


def positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number <= 0:
        raise argparse.ArgumentTypeError(
            f"expected a positive whole number of tokens, got {value!r}"
        )
    return number


def _at_least_zero(unit: str) -> Callable[[str], float]:
    """An argument type for a finite number >= 0 of ``unit`` (seconds, US dollars)."""

    def parse(value: str) -> float:
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not math.isfinite(number) or number < 0:
            raise argparse.ArgumentTypeError(f"expected {unit} as a number >= 0, got {value!r}")
        return number

    return parse


seconds = _at_least_zero("seconds")
dollars = _at_least_zero("US dollars")


def port(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(
            f"expected a port from 0 to 65535 (0 = any free port), got {value!r}"
        )
    return number


def url_root(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(
            f"expected an http:// or https:// URL such as http://127.0.0.1:8787, got {value!r}"
        )
    return value.rstrip("/")


Commands: TypeAlias = "argparse._SubParsersAction[Parser]"
"""Where each command's module adds its parser (``polythink``'s subcommands)."""
