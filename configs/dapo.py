"""DAPO family: token-mean, clip-higher 0.2/0.28, no KL, dynamic sampling, overlong shaping."""

from calclip_jax.config import base_config
from configs.arms import apply_arm


def get_config(arm: str = ""):
    config = base_config()
    config.rl.preset = "dapo"
    return apply_arm(config, arm)
