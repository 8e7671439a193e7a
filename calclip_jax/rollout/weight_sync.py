"""Weight sync: the sampler quantizes the trainer's master weights once per rollout call.

Dense kernels are converted to what the rollout recipe's matmuls would use, so the decode loop
does not re-quantize them at every step:
- bf16 weights: kernels cast to bfloat16 (the bf16 matmul path casts them anyway);
- FP8 weights with FP8 activations, current scaling (tensor/channel/block/mx): kernels replaced
  by their quantize-dequantized values (`quantize_operand`, the same grouping along the
  contraction axis the FP8 dot uses, so the values are bit-identical), and the returned recipe
  marks weights "fp32" so they pass through unchanged;
- otherwise (fp32, delayed weight scaling, FP8 weights with non-FP8 activations): unchanged; the
  matmuls quantize in the loop.
The lm_head kernel (or tied embedding) follows `recipe.lm_head` and is left to the matmul.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from calclip_jax.fp8 import (
    PrecisionRecipe,
    QuantizedArray,
    TensorPrecision,
    dequantize,
    quantize_operand,
)


def _is_dense_kernel(path: tuple[Any, ...]) -> bool:
    keys = [str(getattr(k, "key", k)) for k in path]
    return keys[-1] == "kernel" and "lm_head" not in keys


def presyncable(recipe: PrecisionRecipe) -> bool:
    """True when FP8 dense weights can be quantized once per call (current scaling, FP8 inputs)."""
    w = recipe.weights
    return w.is_fp8 and not w.is_delayed and recipe.activations.is_fp8


def _fake_quant_kernel(kernel_IO: jax.Array, prec: TensorPrecision) -> jax.Array:
    q = quantize_operand(kernel_IO, prec, (0,), "weights")
    return dequantize(q) if isinstance(q, QuantizedArray) else q.astype(jnp.float32)


def sync_weights(params: Any, recipe: PrecisionRecipe) -> tuple[Any, PrecisionRecipe]:
    """(rollout params, rollout recipe) computing the same function as (params, recipe)."""
    w = recipe.weights
    if w.dtype == "bf16":
        convert = lambda x: x.astype(jnp.bfloat16)
        new_recipe = recipe
    elif presyncable(recipe):
        convert = lambda x: _fake_quant_kernel(x, w)
        new_recipe = dataclasses.replace(recipe, weights=TensorPrecision("fp32"))
    else:
        return params, recipe
    params = jax.tree_util.tree_map_with_path(
        lambda path, x: convert(x) if _is_dense_kernel(path) else x, params
    )
    return params, new_recipe
