"""GRPO family: seq-mean-token-mean, eps 0.2, k3 KL beta 0.04. Arms in configs/arms.py."""

from calclip_jax.config import base_config
from configs.arms import apply_arm


def get_config(arm: str = ""):
    config = base_config()
    config.rl.preset = "grpo"
    return apply_arm(config, arm)
