"""GRPO on Countdown (3 numbers, targets up to 100): a harder task with ~8-token answers.

Same knobs as `grpo.py` (arms from configs/arms.py); only the task and the response cap differ.
"""

from ml_collections import ConfigDict

from calclip_jax.config import base_config
from configs.arms import apply_arm


def get_config(arm: str = ""):
    config = base_config()
    config.rl.preset = "grpo"
    config.task.name = "countdown"
    config.task.knobs = ConfigDict({"num_numbers": 3, "max_number": 20, "partial_credit": True})
    config.rollout.max_new_tokens = 16  # answers such as "(7-3)*25" need up to ~11 tokens
    return apply_arm(config, arm)
