"""FP8 KV-cache helpers: per-token, per-head scales over head_dim.

``x`` is [..., head_dim] (e.g. [B, T, H, Dh]); FP8 values keep x's shape and the scale is
[..., 1] (float32). For "bf16" / "fp32" the values are just cast and the scale is all ones, so
the cache layout does not depend on the recipe. The granularity and scaling fields are ignored
(always current scaling per token and head); ``pow2_scale`` and ``margin`` apply.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from calclip_jax.fp8.quantize import quantize
from calclip_jax.fp8.recipe import TensorPrecision


def quantize_kv(x: jnp.ndarray, prec: TensorPrecision) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Return (values in ``prec``'s storage dtype, float32 scale [..., 1])."""
    if not prec.is_fp8:
        return x.astype(prec.jnp_dtype), jnp.ones((*x.shape[:-1], 1), jnp.float32)
    qa = quantize(
        x, prec.jnp_dtype, "channel", axis=-1, pow2_scale=prec.pow2_scale, margin=prec.margin
    )
    return qa.values, qa.scale


def dequantize_kv(values: jnp.ndarray, scale: jnp.ndarray, dtype: Any = jnp.float32) -> jnp.ndarray:
    """``values * scale`` in ``dtype``."""
    return (values.astype(jnp.float32) * scale).astype(dtype)
