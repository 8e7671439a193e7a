"""The built-in default run: full-pipeline FP8 (block-wise) with TIS and Calibrated Clipping,
GRPO on 1-2 digit addition with a small model; finishes in minutes on a 2-core CPU."""

from calclip_jax.config import base_config
from configs.arms import apply_arm


def get_config(arm: str = "fp8_block_tis_calib"):
    config = base_config()
    config.rl.preset = "grpo"
    return apply_arm(config, arm)
