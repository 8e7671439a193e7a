"""Per-token log-probs and entropies of given tokens from logits, in one float32 pass."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def token_logprobs_and_entropy(
    logits_BTV: jax.Array, tokens_BT: jax.Array, mask_BT: jax.Array, temperature: float = 1.0
) -> tuple[jax.Array, jax.Array]:
    """Returns (logp_BT, entropy_BT), float32, both multiplied by mask_BT.

    Both are of the distribution softmax(logits / temperature), the one the sampler draws from
    (temperature is a static float > 0; 1.0 leaves the logits untouched).

    logp_BT[:, t] = log p(tokens[:, t] | tokens[:, :t]), read from logits[:, t - 1];
    entropy_BT[:, t] is the entropy of that same next-token distribution. Position 0 has no
    prediction and gets 0.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    logits_BTV = logits_BTV[:, :-1].astype(jnp.float32)
    if temperature != 1.0:
        logits_BTV = logits_BTV / temperature
    logz_BT = jax.nn.log_softmax(logits_BTV, axis=-1)
    logp_BT = jnp.take_along_axis(logz_BT, tokens_BT[:, 1:, None], axis=-1)[..., 0]
    entropy_BT = -jnp.sum(jnp.exp(logz_BT) * logz_BT, axis=-1)
    pad_B1 = jnp.zeros((tokens_BT.shape[0], 1), jnp.float32)
    mask_BT = mask_BT.astype(jnp.float32)
    logp_BT = jnp.concatenate([pad_B1, logp_BT], axis=1) * mask_BT
    entropy_BT = jnp.concatenate([pad_B1, entropy_BT], axis=1) * mask_BT
    return logp_BT, entropy_BT
