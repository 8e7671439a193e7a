"""A weighted sum of reward functions (`task.reward`), each component kept for the metrics."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from calclip_jax.data.rewards.builtin import RewardFn
from calclip_jax.data.rewards.guard import RewardBatch, guarded_scores
from calclip_jax.data.rewards.loading import reward_function
from calclip_jax.data.rewards.spelling import RewardTerm, parse_reward


@dataclasses.dataclass(frozen=True)
class RewardMix:
    """The parsed terms of a `task.reward` spelling and their functions."""

    spelling: str
    terms: tuple[RewardTerm, ...]
    functions: tuple[RewardFn, ...]

    @classmethod
    def load(cls, spelling: str) -> RewardMix:
        """Parses `spelling` and resolves its functions (imports user modules)."""
        terms = parse_reward(spelling)
        return cls(spelling, terms, tuple(reward_function(t) for t in terms))

    def score(
        self,
        prompts: Sequence[str],
        responses: Sequence[str],
        answers: Sequence[str],
        finished: Sequence[bool],
    ) -> dict[str, np.ndarray]:
        """{"reward": the weighted sum float32 [B], "reward_<label>": each component's scores,
        "reward_errors": int32 [B], how many components failed on the row (they scored 0)}."""
        batch = RewardBatch(prompts, responses, answers, finished)
        total = np.zeros(len(batch), np.float32)
        errors = np.zeros(len(batch), np.int32)
        out: dict[str, np.ndarray] = {}
        for term, fn in zip(self.terms, self.functions, strict=True):
            scores, failed = guarded_scores(term.label, fn, batch)
            out[f"reward_{term.label}"] = scores
            total += np.float32(term.weight) * scores
            errors += failed
        return {"reward": total, **out, "reward_errors": errors}
