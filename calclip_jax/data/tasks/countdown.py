"""Countdown: reach a target from given numbers with + - * / and parentheses.

Prompt "3,7,25,50:100=" (numbers sorted, so a problem has one prompt); the answer is an
expression such as "(7-3)*25" that uses each given number at most once (exactly once with
`use_all`) and evaluates exactly (rational arithmetic) to the target.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from typing import ClassVar

from calclip_jax.data.example import Example
from calclip_jax.data.expression import ParseError, parse_expression
from calclip_jax.data.registry import register_task
from calclip_jax.data.task import Task, verifier_knob
from calclip_jax.data.verify import VerifyResult, garbled_result

_OPERATORS = "+-*/"
_MAX_TRIES = 10_000


@dataclasses.dataclass(frozen=True)
class _Term:
    value: int
    text: str
    precedence: int  # 1: sum/difference, 2: product/quotient, 3: a number


def _combine(a: _Term, b: _Term, op: str) -> _Term | None:
    """a op b with minimal parentheses, or None if the result is not a positive integer."""
    if op == "+":
        return _Term(a.value + b.value, f"{a.text}+{b.text}", 1)
    if op == "-":
        if a.value <= b.value:
            return None
        right = f"({b.text})" if b.precedence == 1 else b.text
        return _Term(a.value - b.value, f"{a.text}-{right}", 1)
    left = f"({a.text})" if a.precedence == 1 else a.text
    if op == "*":
        right = f"({b.text})" if b.precedence == 1 else b.text
        return _Term(a.value * b.value, f"{left}*{right}", 2)
    if b.value == 0 or a.value % b.value:
        return None
    right = f"({b.text})" if b.precedence <= 2 else b.text
    return _Term(a.value // b.value, f"{left}/{right}", 2)


@register_task
@dataclasses.dataclass(frozen=True, kw_only=True)
class CountdownTask(Task):
    """Countdown-style search problems with a known solution that uses all the numbers."""

    name: ClassVar[str] = "countdown"
    prompt_alphabet: ClassVar[str] = "0123456789,:="
    answer_alphabet: ClassVar[str] = "0123456789+-*/()"

    num_numbers: int = 3  # numbers given per problem
    min_number: int = 1  # smallest given number
    max_number: int = 20  # largest given number
    min_target: int = 1  # smallest target
    max_target: int = 100  # largest target
    operators: str = "+-*/"  # operators the generated solutions use (answers may use all four)
    use_all: bool = verifier_knob(False)  # correct answers must use every number exactly once
    # Wrong answers using valid numbers earn 0.5 * max(0, 1 - |value - target| / target).
    partial_credit: bool = verifier_knob(False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_numbers < 2:
            raise ValueError(f"countdown: num_numbers must be >= 2, got {self.num_numbers}")
        if not 0 <= self.min_number <= self.max_number:
            raise ValueError("countdown: need 0 <= min_number <= max_number")
        if not 1 <= self.min_target <= self.max_target:
            raise ValueError("countdown: need 1 <= min_target <= max_target")
        if not self.operators or set(self.operators) - set(_OPERATORS):
            raise ValueError(f"countdown: operators must be a non-empty subset of {_OPERATORS!r}")

    def _solve_randomly(self, rng: random.Random, numbers: tuple[int, ...]) -> _Term | None:
        terms = [_Term(n, str(n), 3) for n in numbers]
        while len(terms) > 1:
            i, j = rng.sample(range(len(terms)), 2)
            combined = _combine(terms[i], terms[j], rng.choice(self.operators))
            if combined is None:
                return None
            terms = [t for k, t in enumerate(terms) if k not in (i, j)] + [combined]
        return terms[0]

    def sample(self, rng: random.Random) -> Example:
        for _ in range(_MAX_TRIES):
            numbers = tuple(
                sorted(
                    rng.randint(self.min_number, self.max_number) for _ in range(self.num_numbers)
                )
            )
            solution = self._solve_randomly(rng, numbers)
            if solution is not None and self.min_target <= solution.value <= self.max_target:
                prompt = ",".join(map(str, numbers)) + f":{solution.value}="
                return Example(prompt, solution.text, numbers, solution.value)
        raise ValueError(f"countdown: no solvable problem found in {_MAX_TRIES} tries: {self}")

    def verify(self, example: Example, response: str, *, finished: bool = True) -> VerifyResult:
        text = response.strip()
        if not finished or not text or set(text) - set(self.answer_alphabet):
            return garbled_result()
        try:
            parsed = parse_expression(text)
        except ParseError:
            return garbled_result()
        used, given = Counter(parsed.numbers), Counter(example.numbers)
        valid = used == given if self.use_all else all(used[n] <= given[n] for n in used)
        value = parsed.value
        correct = valid and value == example.target
        score = 1.0 if correct else 0.0
        if self.partial_credit and valid and value is not None and not correct:
            score = 0.5 * max(0.0, 1.0 - float(abs(value - example.target)) / example.target)
        if value is not None and value.denominator == 1:
            value = int(value)
        return VerifyResult(score + self.format_reward, correct, False, value)
