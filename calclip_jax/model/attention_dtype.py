"""The dtype attention's two matmuls compute in, and the KV-cache layout they read as is."""

from __future__ import annotations

import jax.numpy as jnp

from calclip_jax.fp8 import PrecisionRecipe

# Axes of each stored K / V buffer (b: sequence, k: kv-head, s: slot, h: head dim), as einsum
# operands, by attention's compute dtype. float32: both matmuls plain [M, K] x [K, N] (XLA-CPU
# decode step: 2.7x faster than contraction-minor right operands); bfloat16: right operands
# contraction-minor, the form XLA-CPU runs a bf16 x bf16 -> f32 dot in.
CACHE_LAYOUTS = {
    jnp.dtype(jnp.float32): {"k": "bkhs", "v": "bksh"},
    jnp.dtype(jnp.bfloat16): {"k": "bksh", "v": "bkhs"},
}


def attention_compute_dtype(recipe: PrecisionRecipe) -> jnp.dtype:
    """float32 when the recipe's activations are fp32, else bfloat16 (operands only)."""
    return jnp.float32 if recipe.activations.dtype == "fp32" else jnp.bfloat16


def cache_layout(recipe: PrecisionRecipe) -> dict[str, str]:
    """{"k": axes, "v": axes} of the KV cache under `recipe` (`CACHE_LAYOUTS`)."""
    return CACHE_LAYOUTS[jnp.dtype(attention_compute_dtype(recipe))]
