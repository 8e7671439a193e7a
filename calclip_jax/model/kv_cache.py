"""Static-shape KV cache: per-layer K/V buffers [B, S, K, H] plus a key-validity mask [B, S].

Storage follows the recipe's `kv_cache` precision: float32, bfloat16, or FP8 values with one
float32 scale per token and kv-head (computed at each write step, so every decode step gets its
own scales). Layout: {"key_mask": [B, S] bool, "layers_{i}": {"k", "v"[, "k_scale", "v_scale"]}}.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from calclip_jax.fp8 import TensorPrecision, dequantize_kv, quantize_kv
from calclip_jax.model.config import ModelConfig

Cache = dict[str, jax.Array | dict[str, jax.Array]]


def storage_dtype(prec: TensorPrecision) -> jnp.dtype:
    """Dtype of the K/V buffers for a kv_cache precision."""
    return jnp.dtype(prec.jnp_dtype)


def init_cache(config: ModelConfig, prec: TensorPrecision, batch: int, max_len: int) -> Cache:
    """Empty cache for `batch` sequences of up to `max_len` tokens."""
    shape = (batch, max_len, config.n_kv_heads, config.head_dim)
    cache: Cache = {"key_mask": jnp.zeros((batch, max_len), jnp.bool_)}
    for i in range(config.n_layers):
        layer = {
            "k": jnp.zeros(shape, storage_dtype(prec)),
            "v": jnp.zeros(shape, storage_dtype(prec)),
        }
        if prec.is_fp8:
            layer["k_scale"] = jnp.ones((*shape[:-1], 1), jnp.float32)
            layer["v_scale"] = jnp.ones((*shape[:-1], 1), jnp.float32)
        cache[f"layers_{i}"] = layer
    return cache


def roundtrip(x_BTKH: jax.Array, prec: TensorPrecision) -> jax.Array:
    """What attention sees of x after a store/load at `prec` (no cache): float32."""
    if prec.is_fp8:
        return dequantize_kv(*quantize_kv(x_BTKH, prec))
    return x_BTKH.astype(storage_dtype(prec)).astype(jnp.float32)


def write(
    layer: dict[str, jax.Array],
    k_BTKH: jax.Array,
    v_BTKH: jax.Array,
    index: jax.Array,
    prec: TensorPrecision,
) -> dict[str, jax.Array]:
    """Writes T new tokens at slots [index, index + T)."""
    start = (0, index, 0, 0)
    out = dict(layer)
    for name, x in (("k", k_BTKH), ("v", v_BTKH)):
        if prec.is_fp8:
            values, scale = quantize_kv(x, prec)
            out[name] = jax.lax.dynamic_update_slice(layer[name], values, start)
            scale = jnp.broadcast_to(scale, (*x.shape[:-1], 1)).astype(jnp.float32)
            out[f"{name}_scale"] = jax.lax.dynamic_update_slice(
                layer[f"{name}_scale"], scale, start
            )
        else:
            out[name] = jax.lax.dynamic_update_slice(
                layer[name], x.astype(layer[name].dtype), start
            )
    return out


def read(layer: dict[str, jax.Array]) -> tuple[jax.Array, jax.Array]:
    """Full K and V buffers, dequantized to float32."""
    if "k_scale" in layer:
        return dequantize_kv(layer["k"], layer["k_scale"]), dequantize_kv(
            layer["v"], layer["v_scale"]
        )
    return layer["k"].astype(jnp.float32), layer["v"].astype(jnp.float32)


def update_key_mask(key_mask_BS: jax.Array, attn_mask_BT: jax.Array, index: jax.Array) -> jax.Array:
    """Marks the new tokens' slots valid where attn_mask_BT is 1."""
    return jax.lax.dynamic_update_slice(key_mask_BS, attn_mask_BT.astype(jnp.bool_), (0, index))
