"""Rollout sampler: prefill + KV-cache decode with the rollout precision recipe."""

from calclip_jax.rollout.batch import RolloutBatch
from calclip_jax.rollout.sampler import sample
from calclip_jax.rollout.sampling import draw, filter_logits
from calclip_jax.rollout.weight_sync import sync_weights

__all__ = ["RolloutBatch", "draw", "filter_logits", "sample", "sync_weights"]
