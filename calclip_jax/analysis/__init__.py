"""Pure statistics of experiment outputs (NumPy, no file I/O): finite means and final values,
entropy-surge detection, the ratio's precision noise, the distortion statistics, rounding ties.

Reading run folders is `calclip_jax.workdir`'s; tables and figures over many runs are
`calclip_jax.reports`'.
"""

from calclip_jax.analysis.ratio_noise import PROB_EDGES, noise_by_probability, pooled_tokens
from calclip_jax.analysis.stats import (
    FINAL_STEPS,
    final_value,
    finite_mean,
    finite_stat,
    last_finite,
)
from calclip_jax.analysis.surge import (
    SURGE_FACTOR,
    SURGE_WARMUP,
    SURGE_WINDOW,
    detect_surge,
    max_rebound,
    running_min,
    surge_mask,
    trailing_mean,
)

__all__ = [
    "FINAL_STEPS",
    "PROB_EDGES",
    "SURGE_FACTOR",
    "SURGE_WARMUP",
    "SURGE_WINDOW",
    "detect_surge",
    "final_value",
    "finite_mean",
    "finite_stat",
    "last_finite",
    "max_rebound",
    "noise_by_probability",
    "pooled_tokens",
    "running_min",
    "surge_mask",
    "trailing_mean",
]
