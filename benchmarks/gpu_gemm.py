"""The GEMM section of `gpu_run`: one n x n x n `fp8_dot_general` per precision preset, its
forward alone and forward + both gradients (dX, dW), every quantization inside the timed program.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from benchmarks.gpu_hlo import custom_calls, fp8_gemm_check, triton_gemms
from benchmarks.timing import time_calls, timed
from calclip_jax.fp8 import PrecisionRecipe, fp8_dot_general, matmul_precisions

DN = (((1,), (0,)), ((), ()))


def _dot(preset: str) -> Callable[[jax.Array, jax.Array], jax.Array]:
    act, wgt, grad = matmul_precisions(PrecisionRecipe.preset(preset), "dense")
    return lambda x, w: fp8_dot_general(x, w, DN, lhs_prec=act, rhs_prec=wgt, grad_prec=grad)


def gemm_forward(preset: str) -> Callable[..., jax.Array]:
    """Jitted `x @ w` in `preset` (operands quantized inside)."""
    return jax.jit(_dot(preset))


def gemm_step(preset: str) -> Callable[..., Any]:
    """Jitted (loss, (dx, dw)) of one `fp8_dot_general` in `preset`, the cotangent `c` an
    argument: a closed-over n x n array would be a constant XLA folds the gradient's
    quantization into at compile time (minutes at n = 8192), and the timing would leave it out."""
    dot = _dot(preset)
    return jax.jit(jax.value_and_grad(lambda x, w, c: jnp.sum(dot(x, w) * c), (0, 1)))


def gemm_operands(n: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """x, w (scaled to unit-variance outputs) and the cotangent c, float32 [n, n]."""
    kx, kw, kc = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(kx, (n, n), jnp.float32)
    w = jax.random.normal(kw, (n, n), jnp.float32) / n**0.5
    c = jax.random.normal(kc, (n, n), jnp.float32)
    return x, w, c


def lower_compile(fn: Any, *args: Any) -> Any:
    """The executable of jitted `fn` for `args`, compiled ahead of time."""
    return fn.lower(*args).compile()


def measure_gemm(preset: str, operands: tuple[jax.Array, ...], reps: int) -> dict[str, Any]:
    """Median forward and forward + backward times of `preset`'s GEMM, TFLOP/s (2 n^3 a GEMM),
    compile seconds, the gradient program's custom calls and, for an FP8 preset, its float8 GEMM
    check."""
    x, w, c = operands
    n = x.shape[0]
    fwd, fwd_compile_s = timed(lower_compile, gemm_forward(preset), x, w, wait=False)
    step, step_compile_s = timed(lower_compile, gemm_step(preset), x, w, c, wait=False)
    t_fwd = time_calls(fwd, x, w, reps=reps)
    t_step = time_calls(step, x, w, c, reps=reps)
    row: dict[str, Any] = {
        "n": n,
        "fwd_ms": round(t_fwd * 1e3, 3),
        "fwd_bwd_ms": round(t_step * 1e3, 3),
        "fwd_tflops": round(2 * n**3 / t_fwd / 1e12, 2),
        "fwd_bwd_tflops": round(3 * 2 * n**3 / t_step / 1e12, 2),
        "compile_s": round(fwd_compile_s + step_compile_s, 2),
    }
    hlo = step.as_text()
    calls = custom_calls(hlo)
    check = None if preset == "bf16" else fp8_gemm_check(calls, jax.default_backend())["status"]
    return {**row, "fp8_check": check, "custom_calls": calls, "triton_gemms": triton_gemms(hlo)}
