"""A run's first rollout batch, drawn by a BF16 sampler: the text offline probes measure on
(experiments/distortion.py, experiments/rounding_ties.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from calclip_jax.config import RunSpec
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.train.collect import Collected, run_collector

SAMPLER_PRECISION = "bf16"
RL_STEP = 1  # the batch is the one RL step 1 of the run would draw
LOGP_KEYS = ("tokens", "positions", "attn_mask", "response_mask")  # what a log-prob pass reads


def first_rollout_batch(spec: RunSpec, params: Any, train: Sequence[Any]) -> Collected:
    """RL step 1's rollout batch from a BF16 sampler at the run's temperature: tokens, masks,
    rollout_logp, advantages (the run's Collector, so DAPO dynamic sampling applies as in a run)."""
    collector = run_collector(spec, train, PrecisionRecipe.preset(SAMPLER_PRECISION))
    return collector.collect(params, None, RL_STEP)
