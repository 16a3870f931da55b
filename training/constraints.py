"""Declared ranges of settings, checked where the object that uses them is built.

scikit-learn's `_parameter_constraints` shape: a class maps each parameter to the list of
values it accepts (an `Interval`, an `Options` set, `None`, `bool`, `str`, `dict` or `Path`), and
`check_params` refuses anything else with a UsageError (exit 2) that names the
parameter, its value and what is allowed. It runs before any work, so a C <= 0 or an
init_eps of 2 never trains for minutes and then writes a useless model or dies in the
writer. The model families (training.families.base) and the server's options
(server.options) both declare their ranges here, so a range reads the same everywhere.
It imports nothing heavy: the CLI builds `--help` from modules that import it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from numbers import Integral, Real
from pathlib import Path
from typing import Any

from training.errors import UsageError

CLOSED = ("both", "left", "right", "neither")


@dataclass(frozen=True)
class Interval:
    """Numbers between `low` and `high` (None: unbounded on that side); `whole` asks for
    an integer. Booleans, NaN and infinities are never accepted."""

    low: float | None = None
    high: float | None = None
    closed: str = "both"
    whole: bool = False

    def __post_init__(self) -> None:
        if self.closed not in CLOSED:
            raise ValueError(f"closed must be one of {CLOSED}, got {self.closed!r}")

    @property
    def low_closed(self) -> bool:
        return self.closed in ("both", "left")

    @property
    def high_closed(self) -> bool:
        return self.closed in ("both", "right")

    def accepts(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, Integral if self.whole else Real):
            return False
        if not math.isfinite(value):
            return False
        if self.low is not None and (value < self.low or (value == self.low and not self.low_closed)):
            return False
        if self.high is not None and (value > self.high or (value == self.high and not self.high_closed)):
            return False
        return True

    def __str__(self) -> str:
        kind = "a whole number" if self.whole else "a number"
        low = None if self.low is None else f"{'>=' if self.low_closed else '>'} {_number(self.low)}"
        high = None if self.high is None else f"{'<=' if self.high_closed else '<'} {_number(self.high)}"
        if low and high:
            return (f"{kind} in {'[' if self.low_closed else '('}{_number(self.low)}, "
                    f"{_number(self.high)}{']' if self.high_closed else ')'}")
        return f"{kind} {low or high}" if (low or high) else kind


@dataclass(frozen=True)
class Options:
    """One of a fixed set of strings."""

    values: tuple[str, ...]

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and value in self.values

    def __str__(self) -> str:
        return "one of " + ", ".join(repr(v) for v in self.values)


def whole(low: int | None = None, high: int | None = None) -> Interval:
    """An integer in [low, high]."""
    return Interval(low, high, "both", whole=True)


def positive(closed_at_zero: bool = False) -> Interval:
    """A number > 0 (>= 0 with closed_at_zero)."""
    return Interval(0.0, None, "left" if closed_at_zero else "neither")


Constraint = Interval | Options | type | None
_KINDS: dict[Any, tuple[Callable[[Any], bool], str]] = {
    None: (lambda v: v is None, "None"),
    bool: (lambda v: isinstance(v, bool), "True or False"),
    str: (lambda v: isinstance(v, str), "a string"),
    dict: (lambda v: isinstance(v, dict), "a mapping of names to values"),
    Path: (lambda v: isinstance(v, (str, os.PathLike)), "a path"),
}


def _accepts(constraint: Constraint, value: Any) -> bool:
    if isinstance(constraint, (Interval, Options)):
        return constraint.accepts(value)
    return _KINDS[constraint][0](value)


def describe(allowed: Iterable[Constraint]) -> str:
    """What a list of constraints accepts, in words ("a number > 0 or None")."""
    return " or ".join(str(c) if isinstance(c, (Interval, Options)) else _KINDS[c][1] for c in allowed)


def check_params(owner: str, constraints: Mapping[str, list[Constraint]], values: Mapping[str, Any],
                 spell: Callable[[str], str] = str) -> None:
    """UsageError for the first value its constraints refuse: "OWNER: NAME=VALUE is not
    allowed: NAME must be RANGE". `spell` turns a parameter name into what the user typed
    (e.g. its command-line flag). A name without constraints is the declaring class's bug."""
    for name, value in values.items():
        if name not in constraints:
            raise KeyError(f"{owner}: no constraint declared for {name!r}")
        allowed = constraints[name]
        if not any(_accepts(c, value) for c in allowed):
            raise UsageError(f"{owner}: {spell(name)}={value!r} is not allowed: "
                             f"{spell(name)} must be {describe(allowed)}")


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))
