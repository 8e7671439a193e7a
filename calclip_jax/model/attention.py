"""Grouped-query self-attention with RoPE, optional QK-norm and an optional KV cache.

The q/k/v/o projections are `RecipeDense` (precision-recipe controlled). Attention itself is not:
its two matmuls take bfloat16 operands with float32 scores, softmax and accumulation, and the
output is rounded to bfloat16 (as `jax.nn.dot_product_attention` returns it); for a recipe with
fp32 activations (the float64-referenced baseline) all of it is float32 (`attention_dtype`). K and
V always pass through the recipe's `kv_cache` precision (stored quantized in the cache,
quantize-dequantized without one), so cached decoding and full recomputation see the same keys
and values.

Without a cache (the trainer: update step, old/reference log-probs) every recipe runs
`full_sequence_attention` (`jax.nn.dot_product_attention`: cuDNN flash attention on CUDA for
bfloat16, XLA's implementation rematerialized elsewhere), so the backward saves no [B, N, T, S]
array. With a cache (the sampler's prefill and decode, the shared-prompt forward) it is
`attend_cached` on the cache's layout: `attend`'s numbers (a float32 decode step: matmuls without
transposes, equal up to float32 rounding), which equal `full_sequence_attention`'s up to float
rounding, so the sampler and the trainer compute the same attention for one recipe.
"""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp

from calclip_jax.fp8 import PrecisionRecipe, RecipeDense
from calclip_jax.model import kv_cache
from calclip_jax.model.attention_dtype import CACHE_LAYOUTS, attention_compute_dtype
from calclip_jax.model.config import ModelConfig
from calclip_jax.model.fused_attention import full_sequence_attention
from calclip_jax.model.layers import RMSNorm, apply_rope

_MASKED = -1e30


def attend(
    q_BTNH: jax.Array, k_BSKH: jax.Array, v_BSKH: jax.Array, mask_BTS: jax.Array, dtype: jnp.dtype
) -> jax.Array:
    """Masked softmax attention with GQA, materialized; float32 [B, T, N, H] holding `dtype`
    values (the output is rounded to `dtype`)."""
    return _attention(q_BTNH, k_BSKH, v_BSKH, mask_BTS, dtype, "bskh", "bskh")


def attend_cached(
    q_BTNH: jax.Array, k_cache: jax.Array, v_cache: jax.Array, mask_BTS: jax.Array, dtype: jnp.dtype
) -> jax.Array:
    """`attend` (bitwise) on the KV cache's layout for `dtype` (`CACHE_LAYOUTS`). Its matmuls
    read the bfloat16 layout as is; a float32 cache is transposed into it (a prefill: once a
    call), except for a float32 decode step (one query position): `_attend_one_position`."""
    if q_BTNH.shape[1] == 1 and dtype == jnp.float32:
        return _attend_one_position(q_BTNH, k_cache, v_cache, mask_BTS)
    stored, read = CACHE_LAYOUTS[jnp.dtype(dtype)], CACHE_LAYOUTS[jnp.dtype(jnp.bfloat16)]
    if stored != read:  # the barrier keeps XLA from folding the transposes into the matmuls
        k_cache, v_cache = jax.lax.optimization_barrier(
            (
                jnp.einsum(f"{stored['k']}->{read['k']}", k_cache),
                jnp.einsum(f"{stored['v']}->{read['v']}", v_cache),
            )
        )
    return _attention(q_BTNH, k_cache, v_cache, mask_BTS, dtype, read["k"], read["v"])


def _attend_one_position(
    q_B1NH: jax.Array, k_cache: jax.Array, v_cache: jax.Array, mask_B1S: jax.Array
) -> jax.Array:
    """float32 `_attention` of one query position with its heads as [B, K, R, H], a free
    reshape, so no operand or result of the two matmuls is transposed (XLA-CPU: each decode
    step's attention in 0.6x the time). The same matmuls in another operand order: equal up to
    float32 rounding, not bitwise, which is why bfloat16 (every committed rollout) keeps
    `_attention`."""
    b, _, n, h = q_B1NH.shape
    k_heads = k_cache.shape[1]
    q_BKRH = q_B1NH.reshape(b, k_heads, n // k_heads, h).astype(jnp.float32)
    dot = functools.partial(jnp.einsum, precision=jax.lax.Precision.HIGHEST)
    layout = CACHE_LAYOUTS[jnp.dtype(jnp.float32)]
    k_axes, v_axes = layout["k"], layout["v"]
    scores_BKRS = dot(f"bkrh,{k_axes}->bkrs", q_BKRH, k_cache.astype(jnp.float32)) / jnp.sqrt(h)
    scores_BKRS = jnp.where(mask_B1S[:, None], scores_BKRS, _MASKED)
    probs_BKRS = jax.nn.softmax(scores_BKRS, axis=-1)
    out_BKRH = dot(f"bkrs,{v_axes}->bkrh", probs_BKRS, v_cache.astype(jnp.float32))
    return out_BKRH.reshape(b, 1, n, h)


def dot_precision(dtype: jnp.dtype) -> jax.lax.Precision | jax.lax.DotAlgorithmPreset:
    """The `precision` of attention's two matmuls on `dtype` operands: float32 at HIGHEST (no
    TF32), bfloat16 the bf16 x bf16 -> f32 algorithm (its gradients' dots take bf16 operands)."""
    if jnp.dtype(dtype) == jnp.float32:
        return jax.lax.Precision.HIGHEST
    return jax.lax.DotAlgorithmPreset.BF16_BF16_F32


@functools.partial(jax.checkpoint, static_argnums=(4, 5, 6))
def _attention(
    q_BTNH: jax.Array,
    k: jax.Array,
    v: jax.Array,
    mask_BTS: jax.Array,
    dtype: jnp.dtype,
    k_axes: str,
    v_axes: str,
) -> jax.Array:
    """`attend` on k, v with axes `k_axes`, `v_axes`; rematerialized, so a differentiated call
    (the shared-prompt forward) saves its operands, not the [B, N, T, S] scores.

    bfloat16: both matmuls run the bf16 x bf16 -> f32 algorithm, as `jax.nn.dot_product_attention`
    (the trainer's path) does, so their backward dots round the float32 cotangents to bfloat16
    operands too (without it, a float32 cotangent would make them float32 x float32 dots); the
    forward is bitwise the plain bf16 dots' on XLA-CPU (`test_model_cached_attention.py`)."""
    b, t, n, h = q_BTNH.shape
    k_heads = k.shape[k_axes.index("k")]
    q_BTKRH = q_BTNH.reshape(b, t, k_heads, n // k_heads, h).astype(dtype)
    prec = dot_precision(dtype)
    scores_BKRTS = jnp.einsum(
        f"btkrh,{k_axes}->bkrts",
        q_BTKRH,
        k.astype(dtype),
        preferred_element_type=jnp.float32,
        precision=prec,
    ) / jnp.sqrt(jnp.float32(h))
    scores_BKRTS = jnp.where(mask_BTS[:, None, None], scores_BKRTS, _MASKED)
    probs_BKRTS = jax.nn.softmax(scores_BKRTS, axis=-1)
    out_BTKRH = jnp.einsum(
        f"bkrts,{v_axes}->btkrh",
        probs_BKRTS.astype(dtype),
        v.astype(dtype),
        preferred_element_type=jnp.float32,
        precision=prec,
    )
    return out_BTKRH.astype(dtype).astype(jnp.float32).reshape(b, t, n, h)


class Attention(nn.Module):
    """Self-attention block body: projections, QK-norm, RoPE, cache update, attention, o_proj."""

    config: ModelConfig
    recipe: PrecisionRecipe

    @nn.compact
    def __call__(
        self,
        x_BTD: jax.Array,
        cos_BTH: jax.Array,
        sin_BTH: jax.Array,
        mask_BTS: jax.Array,
        layer_cache: dict[str, jax.Array] | None = None,
        cache_index: jax.Array | None = None,
    ) -> tuple[jax.Array, dict[str, jax.Array] | None]:
        cfg, pol = self.config, self.recipe
        b, t, _ = x_BTD.shape
        bias = cfg.attention_bias

        def proj(name: str, heads: int) -> jax.Array:
            out = RecipeDense(heads * cfg.head_dim, pol, use_bias=bias, name=name)(x_BTD)
            return out.reshape(b, t, heads, cfg.head_dim)

        q_BTNH = proj("q_proj", cfg.n_heads)
        k_BTKH = proj("k_proj", cfg.n_kv_heads)
        v_BTKH = proj("v_proj", cfg.n_kv_heads)
        if cfg.qk_norm:
            q_BTNH = RMSNorm(cfg.norm_eps, name="q_norm")(q_BTNH)
            k_BTKH = RMSNorm(cfg.norm_eps, name="k_norm")(k_BTKH)
        q_BTNH = apply_rope(q_BTNH, cos_BTH, sin_BTH)
        k_BTKH = apply_rope(k_BTKH, cos_BTH, sin_BTH)

        dtype = attention_compute_dtype(pol)
        if layer_cache is None:
            k_BSKH = kv_cache.roundtrip(k_BTKH, pol.kv_cache)
            v_BSKH = kv_cache.roundtrip(v_BTKH, pol.kv_cache)
            out_BTNH = full_sequence_attention(q_BTNH, k_BSKH, v_BSKH, mask_BTS, dtype)
        else:
            layer_cache = kv_cache.write(layer_cache, k_BTKH, v_BTKH, cache_index, pol)
            k_cache, v_cache = kv_cache.read(layer_cache)
            out_BTNH = attend_cached(q_BTNH, k_cache, v_cache, mask_BTS, dtype)
        out_BTD = out_BTNH.reshape(b, t, cfg.n_heads * cfg.head_dim)
        return RecipeDense(cfg.d_model, pol, name="o_proj")(out_BTD), layer_cache
