"""Weight sync: the sampler converts the trainer's master weights once per rollout call.

Dense kernels become what the rollout recipe's matmuls use, so the decode loop does not convert
or quantize them at every step:
- bf16 weights: kernels cast to bfloat16 (the bf16 GEMM casts them anyway);
- FP8 weights with FP8 activations, current scaling (tensor/channel/block/mx): kernels moved out
  of "params" into the ``PREQUANTIZED`` collection as their forward GEMM operands (float8 values
  and scales, ``prequantize_kernel``: the same quantization the trainer's forward applies, so the
  decode runs the same float8 GEMMs on the same values);
- float32 weights and activations: each MLP's gate and up kernels fused into one
  (`mlp.fuse_gate_up`): one GEMM of twice the width, equal to the two up to float32 rounding
  (not bitwise at every shape, so the bf16 and FP8 samplers, every committed rollout, keep two);
- otherwise (delayed weight scaling, FP8 weights with non-FP8 activations): unchanged; the
  matmuls quantize in the loop.
The lm_head kernel (or tied embedding) follows `recipe.lm_head` and is left to the matmul.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from flax import traverse_util

from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.fp8.prequantized import PREQUANTIZED, prequantize_kernel
from calclip_jax.model.mlp import fuse_gate_up


def _is_dense_kernel(path: tuple[str, ...]) -> bool:
    return path[-1] == "kernel" and "lm_head" not in path


def presyncable(recipe: PrecisionRecipe) -> bool:
    """True when FP8 dense weights can be quantized once per call (current scaling, FP8 inputs)."""
    w = recipe.weights
    return w.is_fp8 and not w.is_delayed and recipe.activations.is_fp8


def sync_weights(params: Any, recipe: PrecisionRecipe) -> dict[str, Any]:
    """The rollout's model variables ({"params": ...}, plus ``PREQUANTIZED`` for FP8 weights)
    computing the same function under ``recipe`` as ``{"params": params}``."""
    w = recipe.weights
    if w.dtype == "fp32" and recipe.activations.dtype == "fp32" and not recipe.any_delayed:
        return {"params": fuse_gate_up(params)}
    if w.dtype != "bf16" and not presyncable(recipe):
        return {"params": params}
    flat = traverse_util.flatten_dict(params)
    if w.dtype == "bf16":
        cast = {k: v.astype(jnp.bfloat16) if _is_dense_kernel(k) else v for k, v in flat.items()}
        return {"params": traverse_util.unflatten_dict(cast)}
    kept = {k: v for k, v in flat.items() if not _is_dense_kernel(k)}
    quantized = {k: prequantize_kernel(v, w) for k, v in flat.items() if _is_dense_kernel(k)}
    return {
        "params": traverse_util.unflatten_dict(kept),
        PREQUANTIZED: traverse_util.unflatten_dict(quantized),
    }
