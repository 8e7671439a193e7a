"""DAPO family: token-mean, clip-higher 0.2/0.28, no KL, dynamic sampling, overlong shaping."""

from configs.arms import apply_arm
from configs.common import base_config


def get_config(arm: str = ""):
    config = base_config()
    config.rl.preset = "dapo"
    return apply_arm(config, arm)
