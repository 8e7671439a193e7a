"""FP8 numerics: formats, scaled quantization, delayed scaling, FP8 dot_general, recipe layers.

The names (formats, granularities, scalings, roles, presets) live in ``fp8.vocabulary``."""

from calclip_jax.fp8.delayed import (
    amax_from_history,
    init_history,
    merge_fp8_meta,
    scale_from_history,
    update_history,
)
from calclip_jax.fp8.dense import FP8_META, RecipeDense
from calclip_jax.fp8.dot import fake_quantize_operand, fp8_dot_general
from calclip_jax.fp8.formats import (
    fmt_max,
    from_e8m0,
    mantissa_bits,
    max_scale_exp,
    resolve_format,
    round_scale_pow2,
    to_e8m0,
)
from calclip_jax.fp8.kv import dequantize_kv, quantize_kv
from calclip_jax.fp8.matmul import matmul_precisions, recipe_dot_general, recipe_einsum
from calclip_jax.fp8.quantize import (
    QuantizedArray,
    compute_scale,
    dequantize,
    expand_scale,
    quantize,
    quantize_dequantize,
)
from calclip_jax.fp8.recipe import PrecisionRecipe, TensorPrecision
from calclip_jax.fp8.vocabulary import PRESETS

__all__ = [
    "FP8_META",
    "PRESETS",
    "PrecisionRecipe",
    "QuantizedArray",
    "RecipeDense",
    "TensorPrecision",
    "amax_from_history",
    "compute_scale",
    "dequantize",
    "dequantize_kv",
    "expand_scale",
    "fake_quantize_operand",
    "fmt_max",
    "fp8_dot_general",
    "from_e8m0",
    "init_history",
    "mantissa_bits",
    "matmul_precisions",
    "max_scale_exp",
    "merge_fp8_meta",
    "quantize",
    "quantize_dequantize",
    "quantize_kv",
    "recipe_dot_general",
    "recipe_einsum",
    "resolve_format",
    "round_scale_pow2",
    "scale_from_history",
    "to_e8m0",
    "update_history",
]
