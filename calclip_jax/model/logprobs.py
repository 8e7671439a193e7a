"""Per-token log-probs and entropies of given tokens from logits, in one float32 pass."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def check_temperature(temperature: float) -> None:
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")


def tempered_log_softmax(logits_BTV: jax.Array, temperature: float) -> jax.Array:
    """float32 log softmax(logits / temperature) over the last axis."""
    logits_BTV = logits_BTV.astype(jnp.float32)
    if temperature != 1.0:
        logits_BTV = logits_BTV / temperature
    return jax.nn.log_softmax(logits_BTV, axis=-1)


def stats_from_log_probs(logz_BTV: jax.Array, targets_BT: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(log p(targets), entropy) [B, T] of the distributions with log-probs logz_BTV."""
    logp_BT = jnp.take_along_axis(logz_BTV, targets_BT[..., None], axis=-1)[..., 0]
    entropy_BT = -jnp.sum(jnp.exp(logz_BTV) * logz_BTV, axis=-1)
    return logp_BT, entropy_BT


def next_token_stats(
    logits_BTV: jax.Array, targets_BT: jax.Array, temperature: float
) -> tuple[jax.Array, jax.Array]:
    """(log p(targets), entropy), float32 [B, T], of softmax(logits / temperature) per position
    (no shift, no mask)."""
    return stats_from_log_probs(tempered_log_softmax(logits_BTV, temperature), targets_BT)


def shift_and_mask(
    logp_BT: jax.Array, entropy_BT: jax.Array, mask_BT: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Per-prediction values [B, T - 1] (prediction t - 1 is of token t) placed at [B, T]:
    position 0 gets 0, then both are multiplied by mask_BT."""
    pad_B1 = jnp.zeros((mask_BT.shape[0], 1), jnp.float32)
    mask_BT = mask_BT.astype(jnp.float32)
    logp_BT = jnp.concatenate([pad_B1, logp_BT], axis=1) * mask_BT
    entropy_BT = jnp.concatenate([pad_B1, entropy_BT], axis=1) * mask_BT
    return logp_BT, entropy_BT


def token_logprobs_and_entropy(
    logits_BTV: jax.Array, tokens_BT: jax.Array, mask_BT: jax.Array, temperature: float = 1.0
) -> tuple[jax.Array, jax.Array]:
    """Returns (logp_BT, entropy_BT), float32, both multiplied by mask_BT.

    Both are of the distribution softmax(logits / temperature), the one the sampler draws from
    (temperature is a static float > 0; 1.0 leaves the logits untouched).

    logp_BT[:, t] = log p(tokens[:, t] | tokens[:, :t]), read from logits[:, t - 1];
    entropy_BT[:, t] is the entropy of that same next-token distribution. Position 0 has no
    prediction and gets 0. `chunked_logprobs` computes the same from hidden states, in chunks.
    """
    check_temperature(temperature)
    logz_BTV = tempered_log_softmax(logits_BTV[:, :-1], temperature)
    logp_BT, entropy_BT = stats_from_log_probs(logz_BTV, tokens_BT[:, 1:])
    return shift_and_mask(logp_BT, entropy_BT, mask_BT)
