"""Dense kernels quantized once and reused: the sampler's FP8 weights.

A kernel [K, N] is stored as its forward GEMM operand (the [1, N, K] view quantized along K, as
``fp8_dot_general`` quantizes it), so every decode step runs the same float8 GEMM as the trainer's
forward without quantizing the weights again. Forward only (no gradient).
"""

from __future__ import annotations

import jax.numpy as jnp

from calclip_jax.fp8.gemm_view import OperandView
from calclip_jax.fp8.quantize import QuantizedArray
from calclip_jax.fp8.recipe import TensorPrecision
from calclip_jax.fp8.scaled_gemm import gemm, quantize_view

PREQUANTIZED = "fp8_weights"  # the variable collection holding pre-quantized kernels


def _kernel_view(shape: tuple[int, ...]) -> OperandView:
    return OperandView(tuple(shape), (), (0,))


def prequantize_kernel(kernel_KN: jnp.ndarray, prec: TensorPrecision) -> QuantizedArray:
    """The kernel's forward GEMM operand under an FP8 weight precision ``prec``."""
    if not prec.is_fp8 or prec.is_delayed:
        raise ValueError(f"pre-quantized kernels need current FP8 scaling, got {prec}")
    return quantize_view(_kernel_view(kernel_KN.shape).to_view(kernel_KN), prec, "weights")


def prequantized_dense(
    x: jnp.ndarray,
    kernel: QuantizedArray,
    act: TensorPrecision,
    act_scale: jnp.ndarray | None = None,
) -> jnp.ndarray:
    """float32 ``x [..., K] @ kernel`` with x quantized per ``act`` (its forward GEMM operand)."""
    k = x.shape[-1]
    x_view = x.reshape(1, -1, k)
    out = gemm(quantize_view(x_view, act, "activations", act_scale), kernel)
    return out.reshape(*x.shape[:-1], kernel.values.shape[1])
