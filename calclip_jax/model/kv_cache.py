"""Static-shape KV cache: per layer keys and values with kv-head as a batch axis; a key mask [B, S].

Storage follows the recipe's `kv_cache` precision: float32, bfloat16, or FP8 values with one
float32 scale per token and kv-head (computed at each write step, so every decode step gets its
own scales, stored like the values with a head-dim axis of 1). Layout: {"key_mask": [B, S] bool,
"layers_{i}": {"k", "v"[, "k_scale", "v_scale"]}}. Keys and values are stored the way the score
and value matmuls read them (`attention_dtype.cache_layout`: for float32 attention keys
[B, K, H, S] and values [B, K, S, H], for bfloat16 keys [B, K, S, H] and values [B, K, H, S]),
so a decode step copies no cache into another layout; `attention.attend_cached` is bitwise
`attend` on the [B, S, K, H] arrays, but for a float32 decode step, equal up to float32
rounding.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from calclip_jax.fp8 import PrecisionRecipe, TensorPrecision, dequantize_kv, quantize_kv
from calclip_jax.model.attention_dtype import cache_layout
from calclip_jax.model.config import ModelConfig

Cache = dict[str, jax.Array | dict[str, jax.Array]]


def storage_dtype(prec: TensorPrecision) -> jnp.dtype:
    """Dtype of the K/V buffers for a kv_cache precision."""
    return jnp.dtype(prec.jnp_dtype)


def init_cache(config: ModelConfig, recipe: PrecisionRecipe, batch: int, max_len: int) -> Cache:
    """Empty cache for `batch` sequences of up to `max_len` tokens, stored at `recipe.kv_cache`
    in `cache_layout(recipe)`."""
    prec = recipe.kv_cache
    sizes = {"b": batch, "k": config.n_kv_heads, "s": max_len, "h": config.head_dim}
    cache: Cache = {"key_mask": jnp.zeros((batch, max_len), jnp.bool_)}
    for i in range(config.n_layers):
        layer = {}
        for name, axes in cache_layout(recipe).items():
            layer[name] = jnp.zeros([sizes[a] for a in axes], storage_dtype(prec))
            if prec.is_fp8:  # one scale per slot: the head-dim axis is 1
                scale_shape = [1 if a == "h" else sizes[a] for a in axes]
                layer[f"{name}_scale"] = jnp.ones(scale_shape, jnp.float32)
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
    recipe: PrecisionRecipe,
) -> dict[str, jax.Array]:
    """Writes T new tokens at slots [index, index + T) of a layer of `init_cache(..., recipe,
    ...)`."""
    out, prec, layout = dict(layer), recipe.kv_cache, cache_layout(recipe)
    for name, x in (("k", k_BTKH), ("v", v_BTKH)):
        perm = tuple("bskh".index(a) for a in layout[name])  # [B, T, K, H]: T are slots
        start = tuple(index if a == "s" else 0 for a in layout[name])
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
    """Full K and V buffers (in their stored layout), dequantized to float32."""
    if "k_scale" in layer:
        return dequantize_kv(layer["k"], layer["k_scale"]), dequantize_kv(
            layer["v"], layer["v_scale"]
        )
    return layer["k"].astype(jnp.float32), layer["v"].astype(jnp.float32)


def update_key_mask(key_mask_BS: jax.Array, attn_mask_BT: jax.Array, index: jax.Array) -> jax.Array:
    """Marks the new tokens' slots valid where attn_mask_BT is 1."""
    return jax.lax.dynamic_update_slice(key_mask_BS, attn_mask_BT.astype(jnp.bool_), (0, index))
