"""The sampler's output pytree."""

from __future__ import annotations

import flax.struct
import jax


@flax.struct.dataclass
class RolloutBatch:
    """B*G sequences of length P + N: left-padded prompt, then response, pad after EOS.

    rollout_logp_BT[:, t] is log p(tokens[:, t] | prefix) under the rollout precision's
    un-tempered policy (log_softmax of the raw logits the sampler drew from, before temperature,
    top-k, top-p), nonzero only where response_mask_BT is 1.
    """

    tokens: jax.Array  # [B*G, P+N] int32
    attn_mask: jax.Array  # [B*G, P+N] int32, 1 on real prompt tokens and response tokens
    positions: jax.Array  # [B*G, P+N] int32
    response_mask: jax.Array  # [B*G, P+N] int32, 1 on sampled tokens incl. EOS
    rollout_logp: jax.Array  # [B*G, P+N] float32
    response_len: jax.Array  # [B*G] int32
