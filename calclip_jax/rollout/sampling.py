"""Token selection from logits: greedy, temperature, top-k and top-p (nucleus)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def filter_logits(logits_BV: jax.Array, top_k: int = 0, top_p: float = 1.0) -> jax.Array:
    """Sets logits outside the top-k set and outside the top-p nucleus to -inf.

    The nucleus keeps the smallest prefix of descending-probability tokens whose mass reaches
    top_p (always at least the most likely token); ties at the cut-off are kept.
    """
    neg_inf = jnp.float32(-jnp.inf)
    if 0 < top_k < logits_BV.shape[-1]:
        kth_B1 = jax.lax.top_k(logits_BV, top_k)[0][:, -1:]
        logits_BV = jnp.where(logits_BV < kth_B1, neg_inf, logits_BV)
    if top_p < 1.0:
        sorted_BV = jnp.sort(logits_BV, axis=-1)[:, ::-1]
        probs_BV = jax.nn.softmax(sorted_BV, axis=-1)
        drop_BV = jnp.cumsum(probs_BV, axis=-1) - probs_BV >= top_p
        cutoff_B1 = jnp.min(jnp.where(drop_BV, jnp.inf, sorted_BV), axis=-1, keepdims=True)
        logits_BV = jnp.where(logits_BV < cutoff_B1, neg_inf, logits_BV)
    return logits_BV


def draw(
    rng: jax.Array, logits_BV: jax.Array, temperature: float, top_k: int = 0, top_p: float = 1.0
) -> jax.Array:
    """Sampled token ids [B]; temperature 0 means greedy (argmax)."""
    if temperature == 0.0:
        return jnp.argmax(logits_BV, axis=-1).astype(jnp.int32)
    filtered_BV = filter_logits(logits_BV.astype(jnp.float32) / temperature, top_k, top_p)
    return jax.random.categorical(rng, filtered_BV, axis=-1).astype(jnp.int32)
