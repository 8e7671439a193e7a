"""Value rules for config knobs, called from the `__post_init__` next to each knob's definition.

Each rule raises ValueError("<knob> must be <rule>, got <value>"), the knob's name first, so the
config parser can name the dotted key ("train.learning_rate must be ..."). A knob set to None
(unset) passes. Numbers must be finite: NaN and inf fail every rule.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any


def _require(section: Any, names: tuple[str, ...], rule: str, ok: Callable[[float], bool]):
    for name in names:
        value = getattr(section, name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ValueError(f"{name} must be a number {rule}, got {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"{name} must be finite and {rule}, got {value!r}")
        if not ok(value):
            raise ValueError(f"{name} must be {rule}, got {value!r}")


def at_least(section: Any, minimum: float, *names: str) -> None:
    """Each knob `names` of `section` is None or a finite number >= minimum."""
    _require(section, names, f">= {minimum}", lambda v: v >= minimum)


def above(section: Any, bound: float, *names: str) -> None:
    """Each knob `names` of `section` is None or a finite number > bound."""
    _require(section, names, f"> {bound}", lambda v: v > bound)


def within(section: Any, name: str, interval: str) -> None:
    """Knob `name` is None or in `interval`, written "[0, 1)", "(0, 1]", ... (finite ends)."""
    low, high = (float(x) for x in interval[1:-1].split(","))

    def ok(v: float) -> bool:
        ok_low = v > low if interval[0] == "(" else v >= low
        return ok_low and (v < high if interval[-1] == ")" else v <= high)

    _require(section, (name,), f"in {interval}", ok)


def one_of(section: Any, name: str, allowed: tuple[str, ...]) -> None:
    """Knob `name` is None or one of `allowed`."""
    value = getattr(section, name)
    if value is not None and value not in allowed:
        raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")
