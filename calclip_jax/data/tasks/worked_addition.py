"""Addition asked in words whose reference answer writes the working out, column by column with
carries, before the result:

    prompt:  "Compute 47 + 38 column by column, then give the result."
    answer:  "7 + 8 = 15, write 5 carry 1; 4 + 3 + 1 = 8; so 47 + 38 = 85"

The reference answer is the SFT demonstration (the warm start learns to write the working), so
responses run to tens of tokens (2-digit operands: 33-40 SmolLM2 tokens) where `chat_arithmetic`'s
bare answers take 2-4: room for sampled tokens to go wrong. The score is `chat_arithmetic`'s: the
response's last integer against the sum, whatever working precedes it; `response_metrics` logs
how much of each rollout batch's working is right (`working_*`, `column_working.check_working`).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from typing import ClassVar

from calclip_jax.data.example import Example
from calclip_jax.data.registry import register_task
from calclip_jax.data.tasks.chat_arithmetic import ChatArithmeticTask
from calclip_jax.data.tasks.column_working import check_working, column_working, pass_rates

WORDS = "write carry so"  # the words of the working, besides digits and " +=,;"


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

    def response_metrics(
        self, examples: Sequence[Example], responses: Sequence[str]
    ) -> dict[str, float]:
        """`working_<check>`: the share of responses passing each `check_working` check but the
        result (the verifier's `correct_frac`)."""
        checks = [
            check_working(ex.numbers, text) for ex, text in zip(examples, responses, strict=True)
        ]
        return {f"working_{f}": v for f, v in pass_rates(checks).items() if f != "result_right"}
