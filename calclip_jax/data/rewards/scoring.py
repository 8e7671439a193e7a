"""Scoring a rollout batch: the task's own verifier, its reward replaced by `task.reward`'s mix
when one is set, and the metrics of the mix's components."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from calclip_jax.data.example import Example
from calclip_jax.data.rewards.mix import RewardMix
from calclip_jax.data.task import Task

COMPONENT_PREFIX = "reward_"
ERRORS = "reward_errors"


def score_batch(
    task: Task,
    mix: RewardMix | None,
    examples: Sequence[Example],
    responses: Sequence[str],
    finished: Sequence[bool],
) -> dict[str, np.ndarray]:
    """`task.verify_batch` (reward, correct, garbled); with a mix, its reward instead, plus the
    components ("reward_<label>") and the failure counts ("reward_errors"). `correct` and
    `garbled` stay the verifier's: accuracy and DAPO's group filter do not depend on the mix."""
    scores = task.verify_batch(examples, responses, finished)
    if mix is None:
        return scores
    mixed = mix.score(
        [ex.prompt for ex in examples], responses, [ex.answer for ex in examples], finished
    )
    return {**scores, **mixed}


def reward_metrics(
    first: dict[str, np.ndarray], rounds: Sequence[dict[str, np.ndarray]]
) -> dict[str, float]:
    """Each component's mean over the first rollout round ("reward_<label>_mean", as
    `reward_mean`) and the failed (component, response) evaluations of all rounds
    ("reward_errors"); nothing without a mix."""
    if ERRORS not in first:
        return {}
    metrics = {
        f"{key}_mean": float(np.mean(values))
        for key, values in first.items()
        if key.startswith(COMPONENT_PREFIX) and key != ERRORS
    }
    metrics[ERRORS] = float(sum(int(np.sum(rd[ERRORS])) for rd in rounds))
    return metrics
