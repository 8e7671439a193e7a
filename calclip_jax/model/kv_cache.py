"""Static-shape KV cache: per layer keys [B, K, S, H] and values [B, K, H, S]; a key mask [B, S].

Storage follows the recipe's `kv_cache` precision: float32, bfloat16, or FP8 values with one
float32 scale per token and kv-head (computed at each write step, so every decode step gets its
own scales: k_scale [B, K, S, 1], v_scale [B, K, 1, S]). Layout: {"key_mask": [B, S] bool,
"layers_{i}": {"k", "v"[, "k_scale", "v_scale"]}}. Keys and values are stored the way the score
and value matmuls read them (kv-head as a batch dimension, values slot-minor), so a decode step
does not copy the whole cache into that layout again for each layer (the matmuls are the same:
`attention.attend_cached` is bitwise `attend` on the [B, S, K, H] arrays, but for a float32
decode step, equal up to float32 rounding).
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
    k_shape = (batch, config.n_kv_heads, max_len, config.head_dim)
    v_shape = (batch, config.n_kv_heads, config.head_dim, max_len)
    cache: Cache = {"key_mask": jnp.zeros((batch, max_len), jnp.bool_)}
    for i in range(config.n_layers):
        layer = {
            "k": jnp.zeros(k_shape, storage_dtype(prec)),
            "v": jnp.zeros(v_shape, storage_dtype(prec)),
        }
        if prec.is_fp8:
            layer["k_scale"] = jnp.ones((batch, config.n_kv_heads, max_len, 1), jnp.float32)
            layer["v_scale"] = jnp.ones((batch, config.n_kv_heads, 1, max_len), jnp.float32)
        cache[f"layers_{i}"] = layer
    return cache


def roundtrip(x_BTKH: jax.Array, prec: TensorPrecision) -> jax.Array:
    """What attention sees of x after a store/load at `prec` (no cache): float32."""
    if prec.is_fp8:
        return dequantize_kv(*quantize_kv(x_BTKH, prec))
    return x_BTKH.astype(storage_dtype(prec)).astype(jnp.float32)


# [B, T, K, H] -> the stored layout of each buffer, and the slot axis written along.
_STORED = {"k": ((0, 2, 1, 3), 2), "v": ((0, 2, 3, 1), 3)}


def write(
    layer: dict[str, jax.Array],
    k_BTKH: jax.Array,
    v_BTKH: jax.Array,
    index: jax.Array,
    prec: TensorPrecision,
) -> dict[str, jax.Array]:
    """Writes T new tokens at slots [index, index + T)."""
    out = dict(layer)
    for name, x in (("k", k_BTKH), ("v", v_BTKH)):
        perm, slot_axis = _STORED[name]
        start = tuple(index if a == slot_axis else 0 for a in range(4))
        if prec.is_fp8:
            values, scale = quantize_kv(x, prec)
            scale = jnp.broadcast_to(scale, (*x.shape[:-1], 1)).astype(jnp.float32)
            out[name] = jax.lax.dynamic_update_slice(layer[name], values.transpose(perm), start)
            out[f"{name}_scale"] = jax.lax.dynamic_update_slice(
                layer[f"{name}_scale"], scale.transpose(perm), start
            )
        else:
            values = x.astype(layer[name].dtype).transpose(perm)
            out[name] = jax.lax.dynamic_update_slice(layer[name], values, start)
    return out


def read(layer: dict[str, jax.Array]) -> tuple[jax.Array, jax.Array]:
    """Full K [B, K, S, H] and V [B, K, H, S] buffers, dequantized to float32."""
    if "k_scale" in layer:
        return dequantize_kv(layer["k"], layer["k_scale"]), dequantize_kv(
            layer["v"], layer["v_scale"]
        )
    return layer["k"].astype(jnp.float32), layer["v"].astype(jnp.float32)


def update_key_mask(key_mask_BS: jax.Array, attn_mask_BT: jax.Array, index: jax.Array) -> jax.Array:
    """Marks the new tokens' slots valid where attn_mask_BT is 1."""
    return jax.lax.dynamic_update_slice(key_mask_BS, attn_mask_BT.astype(jnp.bool_), (0, index))
