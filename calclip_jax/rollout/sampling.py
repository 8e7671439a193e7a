"""Token selection from logits: greedy, temperature, top-k and top-p (nucleus)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def filter_logits(logits_BV: jax.Array, top_k: int | None = None, top_p: float = 1.0) -> jax.Array:
    """Sets logits outside the top-k set and outside the top-p nucleus to -inf.

    The nucleus keeps the smallest prefix of descending-probability tokens whose mass reaches
    top_p (always at least the most likely token); ties at the cut-off are kept.
    """
    neg_inf = jnp.float32(-jnp.inf)
    if top_k is not None and 0 < top_k < logits_BV.shape[-1]:
        kth_B1 = jax.lax.top_k(logits_BV, top_k)[0][:, -1:]
        logits_BV = jnp.where(logits_BV < kth_B1, neg_inf, logits_BV)
    if top_p < 1.0:
        sorted_BV = jnp.sort(logits_BV, axis=-1)[:, ::-1]
        probs_BV = jax.nn.softmax(sorted_BV, axis=-1)
        drop_BV = jnp.cumsum(probs_BV, axis=-1) - probs_BV >= top_p
        cutoff_B1 = jnp.min(jnp.where(drop_BV, jnp.inf, sorted_BV), axis=-1, keepdims=True)
        logits_BV = jnp.where(logits_BV < cutoff_B1, neg_inf, logits_BV)
    return logits_BV


def sampling_logits(
    logits_BV: jax.Array, temperature: float, top_k: int | None = None, top_p: float = 1.0
) -> jax.Array:
    """The float32 logits the sampler draws from: logits / temperature, then top-k / top-p
    (temperature 0, greedy: the untempered logits)."""
    logits_BV = logits_BV.astype(jnp.float32)
    if temperature == 0.0:
        return logits_BV
    return filter_logits(logits_BV / temperature, top_k, top_p)


def draw_with_logp(
    rng: jax.Array,
    logits_BV: jax.Array,
    temperature: float,
    top_k: int | None = None,
    top_p: float = 1.0,
) -> tuple[jax.Array, jax.Array]:
    """(token ids [B], their log-prob [B] under the distribution they were drawn from). Greedy
    (temperature 0) takes the argmax and reports its untempered log-prob."""
    sampled_BV = sampling_logits(logits_BV, temperature, top_k, top_p)
    if temperature == 0.0:
        tok_B = jnp.argmax(sampled_BV, axis=-1).astype(jnp.int32)
    else:
        tok_B = jax.random.categorical(rng, sampled_BV, axis=-1).astype(jnp.int32)
    logz_BV = jax.nn.log_softmax(sampled_BV, axis=-1)
    return tok_B, jnp.take_along_axis(logz_BV, tok_B[:, None], axis=-1)[:, 0]


def draw(
    rng: jax.Array,
    logits_BV: jax.Array,
    temperature: float,
    top_k: int | None = None,
    top_p: float = 1.0,
) -> jax.Array:
    """Sampled token ids [B]; temperature 0 means greedy (argmax)."""
    return draw_with_logp(rng, logits_BV, temperature, top_k, top_p)[0]
