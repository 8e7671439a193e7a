"""One task instance, and its conversion to/from tfds records."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np


@dataclasses.dataclass(frozen=True)
class Example:
    """A task instance: `prompt` text, a reference `answer` text, and the structured problem.

    numbers: the operands (arithmetic) or the given numbers (countdown); target: the value to reach.
    system: a system message for the chat template ("" = none; tasks read from files set it).
    """

    prompt: str
    answer: str
    numbers: tuple[int, ...]
    target: int
    system: str = ""

    def to_record(self, *, with_system: bool = False) -> dict[str, Any]:
        """The tfds feature dict for this example (`with_system`: for tasks that store one)."""
        record = {
            "prompt": self.prompt,
            "answer": self.answer,
            "numbers": np.asarray(self.numbers, np.int64),
            "target": np.int64(self.target),
        }
        if with_system:
            record["system"] = self.system
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Example:
        """Builds an Example from a tfds record (text features may come back as bytes)."""

        def text(value: str | bytes) -> str:
            return value.decode("utf-8") if isinstance(value, bytes) else str(value)

        return cls(
            prompt=text(record["prompt"]),
            answer=text(record["answer"]),
            numbers=tuple(int(n) for n in np.asarray(record["numbers"]).reshape(-1)),
            target=int(record["target"]),
            system=text(record["system"]) if "system" in record else "",
        )
