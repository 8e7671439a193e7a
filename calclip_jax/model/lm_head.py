"""Tied output projection: logits = x @ embedding.T at the policy's lm_head precision."""

from __future__ import annotations

import jax

from calclip_jax.fp8 import PrecisionPolicy, policy_einsum


def tied_lm_head(x_BTD: jax.Array, embedding_VD: jax.Array, policy: PrecisionPolicy) -> jax.Array:
    """float32 logits [B, T, V] from the transposed embedding via `policy_einsum(role="lm_head")`.

    FP8 weight scale groups run along D (one per vocabulary row for "channel"). The tied head is
    stateless: a "delayed" lm_head precision falls back to current per-tensor scaling.
    """
    return policy_einsum("btd,vd->btv", x_BTD, embedding_VD, policy, role="lm_head")
