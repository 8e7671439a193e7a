"""GRPO family: seq-mean-token-mean, eps 0.2, k3 KL beta 0.04. Arms in configs/arms.py."""

from configs.arms import apply_arm
from configs.common import base_config


def get_config(arm: str = ""):
    config = base_config()
    config.rl.preset = "grpo"
    return apply_arm(config, arm)
