"""Reading a final answer out of a response: its last integer, its last number, its last
`\\boxed{...}`, and the numeric value of an answer text."""

from __future__ import annotations

import re
from fractions import Fraction

_INTEGER = re.compile(r"-?[0-9]+")
# an integer with optional thousands separators ("1,234"), an optional decimal part, or a ratio
_NUMBER = re.compile(r"-?(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?(?:/[0-9]+)?")
_BOXED = "\\boxed{"


def last_integer(text: str) -> int | None:
    """The last integer in `text` ("The answer is 12." -> 12), None without one."""
    found = _INTEGER.findall(text)
    return int(found[-1]) if found else None


def last_number(text: str) -> Fraction | None:
    """The last number in `text` (integers, "1,234", decimals, "3/4"), exactly; None without one."""
    found = _NUMBER.findall(text)
    return as_number(found[-1]) if found else None


def last_boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` (nested braces kept), None without a closed one."""
    start = text.rfind(_BOXED)
    if start < 0:
        return None
    depth, begin = 1, start + len(_BOXED)
    for i in range(begin, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[begin:i].strip()
    return None


def as_number(text: str) -> Fraction | None:
    """The exact value of a number written as `text` ("-3", "1,234", "0.25", "3/4"), else None."""
    cleaned = text.strip().strip("$").replace(",", "")
    if not _NUMBER.fullmatch(cleaned):
        return None
    try:
        return Fraction(cleaned)
    except (ValueError, ZeroDivisionError):
        return None


def same_answer(predicted: str, reference: str) -> bool:
    """Equal as numbers when both are numbers, else equal as text (surrounding space and `$`
    ignored)."""
    a, b = as_number(predicted), as_number(reference)
    if a is not None and b is not None:
        return a == b
    return predicted.strip().strip("$").strip() == reference.strip().strip("$").strip()


def within_tolerance(value: Fraction, reference: Fraction, tol: float) -> bool:
    """|value - reference| <= tol * max(1, |reference|): absolute below 1, relative above."""
    return abs(float(value - reference)) <= tol * max(1.0, abs(float(reference)))
