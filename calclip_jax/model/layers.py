"""Small building blocks: RMSNorm and rotary position embeddings (HF rotate_half layout)."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp


class RMSNorm(nn.Module):
    """RMSNorm in float32 with a learned `scale` (HF Llama convention: weight * normalized x)."""

    eps: float = 1e-6

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        scale = self.param("scale", nn.initializers.ones, (x.shape[-1],), jnp.float32)
        x = x.astype(jnp.float32)
        x = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + self.eps)
        return x * scale


def rope_cos_sin(
    positions_BT: jax.Array, head_dim: int, theta: float
) -> tuple[jax.Array, jax.Array]:
    """cos/sin tables [B, T, head_dim] in float32 for integer positions."""
    inv_freq = 1.0 / (theta ** (jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim))
    freqs_BTH = positions_BT.astype(jnp.float32)[..., None] * inv_freq
    emb_BTD = jnp.concatenate([freqs_BTH, freqs_BTH], axis=-1)
    return jnp.cos(emb_BTD), jnp.sin(emb_BTD)


def apply_rope(x_BTNH: jax.Array, cos_BTH: jax.Array, sin_BTH: jax.Array) -> jax.Array:
    """Rotates [B, T, heads, head_dim], HF rotate_half convention (no weight permutation)."""
    half = x_BTNH.shape[-1] // 2
    rotated = jnp.concatenate([-x_BTNH[..., half:], x_BTNH[..., :half]], axis=-1)
    return x_BTNH * cos_BTH[:, :, None, :] + rotated * sin_BTH[:, :, None, :]
