"""Addition asked in words whose reference answer writes the working out, column by column with
carries, before the result:

    prompt:  "Compute 47 + 38 column by column, then give the result."
    answer:  "7 + 8 = 15, write 5 carry 1; 4 + 3 + 1 = 8; so 47 + 38 = 85"

The reference answer is the SFT demonstration (the warm start learns to write the working), so
responses run to tens of tokens (2-digit operands: 33-40 SmolLM2 tokens) where `chat_arithmetic`'s
bare answers take 2-4: room for sampled tokens to go wrong. The score is `chat_arithmetic`'s: the
response's last integer against the sum, whatever working precedes it.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from typing import ClassVar

from calclip_jax.data.example import Example
from calclip_jax.data.registry import register_task
from calclip_jax.data.tasks.chat_arithmetic import ChatArithmeticTask

WORDS = "write carry so"  # the words of the working, besides digits and " +=,;"


def column_working(numbers: Sequence[int]) -> str:
    """The column-by-column sum of non-negative `numbers`, ending with "so <sum expression> = s".

    Per column from the right: the operands' digits there (an operand with fewer digits has
    none), plus the carry in, "= s"; every column but the last then says ", write <s mod 10>",
    and " carry <s div 10>" when s >= 10; the last column's s is written whole.
    """
    if len(numbers) < 2 or min(numbers) < 0:
        raise ValueError(f"column_working needs two or more non-negative numbers: {numbers}")
    digits = [str(n)[::-1] for n in numbers]
    columns = max(len(d) for d in digits)
    parts, carry = [], 0
    for i in range(columns):
        terms = [d[i] for d in digits if i < len(d)] + ([str(carry)] if carry else [])
        total = sum(int(t) for t in terms)
        part = f"{' + '.join(terms)} = {total}"
        if i < columns - 1:
            carry = total // 10
            part += f", write {total % 10}" + (f" carry {carry}" if carry else "")
        parts.append(part)
    expression = " + ".join(str(n) for n in numbers)
    return "; ".join(parts) + f"; so {expression} = {sum(numbers)}"


@register_task
@dataclasses.dataclass(frozen=True, kw_only=True)
class WorkedAdditionTask(ChatArithmeticTask):
    """`chat_arithmetic` addition whose reference answer is `column_working` of the operands.

    Knobs as `chat_arithmetic`'s (digits, operands, instruction); `operators` must be "+" and
    `answer_from` "last_integer" (the working is no bare integer). `Example.answer` is the
    working, `Example.target` the sum: the verifier reads the target, the SFT the answer (so a
    `task.reward` term that compares with the reference answer, such as `last_integer` or
    `exact`, does not fit this task; its own reward does).
    """

    name: ClassVar[str] = "worked_addition"

    instruction: str = "Compute {expression} column by column, then give the result."

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.operators != "+":
            raise ValueError(f"worked_addition: operators must be '+', got {self.operators!r}")
        if self.answer_from != "last_integer":
            raise ValueError(
                "worked_addition: answer_from must be 'last_integer' (the reference answer "
                f"writes the working out), got {self.answer_from!r}"
            )

    @property
    def alphabet(self) -> str:
        """The chat_arithmetic alphabet and the working's words and punctuation."""
        return "".join(dict.fromkeys(super().alphabet + WORDS + " +=,;"))

    def sample(self, rng: random.Random) -> Example:
        ex = super().sample(rng)
        return dataclasses.replace(ex, answer=column_working(ex.numbers))
