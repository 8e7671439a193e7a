"""calclip_jax: stable FP8 RL for language models with Calibrated Clipping."""
