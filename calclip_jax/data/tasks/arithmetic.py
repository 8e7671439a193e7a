"""Multi-digit arithmetic: prompt "12+345=", answer "357" (standard operator precedence)."""

from __future__ import annotations

import dataclasses
import random
import re
from typing import ClassVar

from calclip_jax.data.example import Example
from calclip_jax.data.expression import parse_expression
from calclip_jax.data.registry import register_task
from calclip_jax.data.task import Task, verifier_knob
from calclip_jax.data.verify import VerifyResult, digit_credit, garbled_result

_INTEGER = re.compile(r"-?[0-9]+")
_OPERATORS = "+-*"


@register_task
@dataclasses.dataclass(frozen=True, kw_only=True)
class ArithmeticTask(Task):
    """Evaluate `a op b [op c ...]` over non-negative integers; the answer is the integer result."""

    name: ClassVar[str] = "arithmetic"
    prompt_alphabet: ClassVar[str] = "0123456789+-*="
    answer_alphabet: ClassVar[str] = "0123456789-"

    min_digits: int = 1  # fewest digits of an operand
    max_digits: int = 3  # most digits of an operand
    num_operands: int = 2  # operands per problem
    operators: str = "+"  # operators to draw from, a subset of "+-*"
    allow_negative: bool = False  # if False, problems with a negative result are redrawn
    # Wrong answers earn the right-aligned share of matching digits.
    partial_credit: bool = verifier_knob(True)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 1 <= self.min_digits <= self.max_digits:
            raise ValueError(f"arithmetic: need 1 <= min_digits <= max_digits, got {self}")
        if self.num_operands < 2:
            raise ValueError(f"arithmetic: num_operands must be >= 2, got {self.num_operands}")
        if not self.operators or set(self.operators) - set(_OPERATORS):
            raise ValueError(f"arithmetic: operators must be a non-empty subset of {_OPERATORS!r}")
        if self.max_digits * self.num_operands > 18:
            raise ValueError("arithmetic: max_digits * num_operands must be <= 18 (int64 results)")

    def _operand(self, rng: random.Random) -> int:
        digits = rng.randint(self.min_digits, self.max_digits)
        low = 0 if digits == 1 else 10 ** (digits - 1)
        return rng.randint(low, 10**digits - 1)

    def sample(self, rng: random.Random) -> Example:
        while True:
            numbers = tuple(self._operand(rng) for _ in range(self.num_operands))
            ops = [rng.choice(self.operators) for _ in range(self.num_operands - 1)]
            expression = str(numbers[0]) + "".join(
                op + str(n) for op, n in zip(ops, numbers[1:], strict=True)
            )
            value = parse_expression(expression).value
            assert value is not None and value.denominator == 1
            if self.allow_negative or value >= 0:
                target = int(value)
                return Example(expression + "=", str(target), numbers, target)

    def verify(self, example: Example, response: str, *, finished: bool = True) -> VerifyResult:
        return self.score_answer(example, response.strip(), finished)

    def score_answer(self, example: Example, text: str, finished: bool) -> VerifyResult:
        """Scores `text` as the answer: garbled unless finished and an integer."""
        if not finished or not _INTEGER.fullmatch(text):
            return garbled_result()
        value = int(text)
        correct = value == example.target
        if correct:
            score = 1.0
        else:
            score = digit_credit(text, str(example.target)) if self.partial_credit else 0.0
        return VerifyResult(score + self.format_reward, correct, False, value)
