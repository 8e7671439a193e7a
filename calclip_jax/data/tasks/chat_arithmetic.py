"""Arithmetic asked in words, for chat models: "Compute 59 + 63. Reply with only the result, no
words." The answer is read from the response: its last integer, or the whole response."""

from __future__ import annotations

import dataclasses
import random
import re
from typing import ClassVar

from calclip_jax.data.example import Example
from calclip_jax.data.registry import register_task
from calclip_jax.data.task import verifier_knob
from calclip_jax.data.tasks.arithmetic import ArithmeticTask
from calclip_jax.data.verify import VerifyResult

_INTEGER = re.compile(r"-?[0-9]+")
_OPERATOR = re.compile(r"(?<=[0-9])([+*-])")
ANSWER_FROM = ("last_integer", "whole_response")


@register_task
@dataclasses.dataclass(frozen=True, kw_only=True)
class ChatArithmeticTask(ArithmeticTask):
    """`ArithmeticTask` problems inside an instruction; the reference answer is the bare integer.

    answer_from: "last_integer" reads the response's last integer ("The answer is 12." -> 12), so
    a chat model is scored on arithmetic, not on format; "whole_response" needs the bare integer.
    A response without an integer, or without EOS, is garbled.
    """

    name: ClassVar[str] = "chat_arithmetic"

    instruction: str = "Compute {expression}. Reply with only the result, no words."
    answer_from: str = verifier_knob("last_integer")  # one of ANSWER_FROM
    partial_credit: bool = verifier_knob(False)  # right-aligned digit credit for wrong answers

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.instruction.count("{expression}") != 1:
            raise ValueError(
                f"chat_arithmetic: instruction must contain '{{expression}}' once: "
                f"{self.instruction!r}"
            )
        if self.answer_from not in ANSWER_FROM:
            raise ValueError(
                f"chat_arithmetic: answer_from must be one of {ANSWER_FROM}, "
                f"got {self.answer_from!r}"
            )

    @property
    def alphabet(self) -> str:
        """The instruction's characters too (for a character tokenizer)."""
        text = self.instruction.replace("{expression}", "") + " " + super().alphabet
        return "".join(dict.fromkeys(text))

    def sample(self, rng: random.Random) -> Example:
        ex = super().sample(rng)
        expression = _OPERATOR.sub(r" \1 ", ex.prompt.removesuffix("="))
        prompt = self.instruction.replace("{expression}", expression)
        return dataclasses.replace(ex, prompt=prompt)

    def verify(self, example: Example, response: str, *, finished: bool = True) -> VerifyResult:
        text = response.strip()
        if self.answer_from == "last_integer":
            integers = _INTEGER.findall(text)
            text = integers[-1] if integers else ""
        return self.score_answer(example, text, finished)
