"""The FP8 vocabulary, defined once: formats, scale granularities, scaling methods, roles and
precision presets. Every other module (and configs/, benchmarks/, experiments/) imports these.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

# Format name -> storage dtype. Scaled formats are quantized with explicit scales (e2m1 is the
# 4-bit rung of the precision ladder); bf16 / fp32 are plain casts.
FORMATS: dict[str, Any] = {
    "e4m3": jnp.float8_e4m3fn,
    "e5m2": jnp.float8_e5m2,
    "e2m1": jnp.float4_e2m1fn,
    "bf16": jnp.bfloat16,
    "fp32": jnp.float32,
}
SCALED_FORMATS: tuple[str, ...] = ("e4m3", "e5m2", "e2m1")

# Layout of the scale groups of a scaled format.
GRANULARITIES: tuple[str, ...] = ("tensor", "channel", "block", "mx")
# How a scale is chosen: from the current amax, or from an amax history (per tensor only).
SCALINGS: tuple[str, ...] = ("current", "delayed")
AMAX_REDUCES: tuple[str, ...] = ("max", "most_recent")  # delayed scaling: amax of the history

# Tensor roles of a precision recipe; the first three are the operands of a dense matmul.
OPERAND_ROLES: tuple[str, ...] = ("weights", "activations", "gradients")
ROLES: tuple[str, ...] = (*OPERAND_ROLES, "lm_head", "kv_cache")
# Recipe-controlled matmuls: "dense" uses weights / activations / gradients, "lm_head" lm_head.
MATMUL_ROLES: tuple[str, ...] = ("dense", "lm_head")

# FP8 precision presets: name -> (granularity, scaling) of weights, activations and gradients.
FP8_PRESETS: dict[str, tuple[str, str]] = {
    "fp8_tensor": ("tensor", "current"),
    "fp8_delayed": ("tensor", "delayed"),
    "fp8_channel": ("channel", "current"),
    "fp8_block": ("block", "current"),
    "fp8_mx": ("mx", "current"),
}
PRESETS: tuple[str, ...] = ("fp32", "bf16", *FP8_PRESETS)
