"""Verifier result type and shared reward helpers."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from fractions import Fraction

import numpy as np


@dataclasses.dataclass(frozen=True)
class VerifyResult:
    """Outcome of checking one response.

    reward: correctness (1.0, or partial credit in [0, 1)) plus `format_reward` if well formed.
    correct: the answer is right. garbled: the response failed the well-formedness check
    (unfinished, characters outside the answer alphabet, or unparseable).
    parsed: the numeric value of the parsed answer (None when unparseable).
    """

    reward: float
    correct: bool
    garbled: bool
    parsed: int | Fraction | None


def garbled_result() -> VerifyResult:
    """The result for a malformed response: zero reward, not correct."""
    return VerifyResult(reward=0.0, correct=False, garbled=True, parsed=None)


def digit_credit(predicted: str, reference: str) -> float:
    """Fraction of characters that match, right-aligned, over the longer of the two strings."""
    width = max(len(predicted), len(reference))
    if width == 0:
        return 0.0
    hits = sum(p == r for p, r in zip(reversed(predicted), reversed(reference), strict=False))
    return hits / width


def rewards_to_arrays(results: Sequence[VerifyResult]) -> dict[str, np.ndarray]:
    """Stacks results into arrays: reward_B float32, correct_B bool, garbled_B bool."""
    return {
        "reward": np.asarray([r.reward for r in results], np.float32),
        "correct": np.asarray([r.correct for r in results], bool),
        "garbled": np.asarray([r.garbled for r in results], bool),
    }
