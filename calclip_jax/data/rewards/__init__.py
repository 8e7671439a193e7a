"""Pluggable rewards (`task.reward`): built-in verifiers and users' `module:function`s, combined
by weights, called on decoded responses in batches; a failing function scores 0, reported."""

from calclip_jax.data.rewards.builtin import BUILTIN_REWARDS, RewardFn
from calclip_jax.data.rewards.mix import RewardMix
from calclip_jax.data.rewards.scoring import reward_metrics, score_batch
from calclip_jax.data.rewards.spelling import RewardTerm, parse_reward

__all__ = [
    "BUILTIN_REWARDS",
    "RewardFn",
    "RewardMix",
    "RewardTerm",
    "parse_reward",
    "reward_metrics",
    "score_batch",
]
