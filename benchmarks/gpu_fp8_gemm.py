"""Hopper check: does XLA turn the per-tensor FP8 dot into a cuBLASLt FP8 GEMM, and how fast is it?

Run on an H100/H200 (jax[cuda12]): ``python benchmarks/gpu_fp8_gemm.py [--n 8192]``.
It (1) compiles ``fp8_dot_general`` (per-tensor E4M3 forward; fwd + bwd with E5M2 grads),
(2) searches the optimized HLO for the cuBLASLt FP8 custom call (``__cublas$lt$matmul$f8``),
(3) times the FP8 forward GEMM, a bf16 GEMM (f32 accumulation) and the fwd+bwd steps at n^3.

XLA flags: unless XLA_FLAGS is already set, ``--xla_gpu_enable_triton_gemm=false`` is used so
GEMMs are not claimed by Triton fusions before the cuBLAS(Lt) rewrite (set XLA_FLAGS yourself to
compare, e.g. ``XLA_FLAGS= python ...``). The flags must be set before jax initializes its backend.
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_gpu_enable_triton_gemm=false")

import argparse
import re
import statistics
import time

import jax
import jax.numpy as jnp
from jax import lax

from calclip_jax.fp8 import TensorPrecision, fp8_dot_general

DN = (((1,), (0,)), ((), ()))
E4M3 = TensorPrecision("e4m3", "tensor")
E5M2 = TensorPrecision("e5m2", "tensor")
FP8_CALL = "__cublas$lt$matmul$f8"


def median_time(fn, *args, reps: int = 20) -> float:
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def custom_calls(hlo: str) -> list[str]:
    return sorted(set(re.findall(r'custom_call_target="([^"]+)"', hlo)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    n = args.n
    print(f"jax {jax.__version__} backend={jax.default_backend()} devices={jax.devices()}")
    print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}")
    kx, kw, kc = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(kx, (n, n), jnp.bfloat16)
    w = (jax.random.normal(kw, (n, n), jnp.float32) / n**0.5).astype(jnp.bfloat16)
    c = jax.random.normal(kc, (n, n), jnp.float32)

    fp8_fwd = jax.jit(lambda a, b: fp8_dot_general(a, b, DN, lhs_prec=E4M3, rhs_prec=E4M3))
    bf16_fwd = jax.jit(lambda a, b: lax.dot_general(a, b, DN, preferred_element_type=jnp.float32))

    def step(dot):
        # Random upstream gradient c, so XLA cannot constant-fold the backward pass.
        loss = lambda a, b, c: jnp.sum(dot(a, b) * c)
        return jax.jit(jax.value_and_grad(loss, (0, 1)))

    fp8_step = step(
        lambda a, b: fp8_dot_general(a, b, DN, lhs_prec=E4M3, rhs_prec=E4M3, grad_prec=E5M2)
    )
    bf16_step = step(lambda a, b: bf16_fwd(a, b))

    ok = True
    for name, fn, fargs in [("fp8 forward", fp8_fwd, (x, w)), ("fp8 fwd+bwd", fp8_step, (x, w, c))]:
        hlo = fn.lower(*fargs).compile().as_text()
        calls = custom_calls(hlo)
        n_fp8 = hlo.count(FP8_CALL)
        print(f"{name}: custom calls {calls}; {FP8_CALL} occurrences: {n_fp8}")
        ok &= n_fp8 > 0
    expected = "3 (fwd, dX, dW)"
    print(f"cuBLASLt FP8 GEMM found: {ok} (fwd+bwd should show {expected})")

    flops = 2 * n**3
    t_fp8, t_bf16 = (
        median_time(fp8_fwd, x, w, reps=args.reps),
        median_time(bf16_fwd, x, w, reps=args.reps),
    )
    s_fp8, s_bf16 = (
        median_time(fp8_step, x, w, c, reps=args.reps),
        median_time(bf16_step, x, w, c, reps=args.reps),
    )
    print(
        f"forward GEMM {n}^3: fp8 {t_fp8 * 1e3:.2f} ms ({flops / t_fp8 / 1e12:.0f} TFLOP/s), "
        f"bf16 {t_bf16 * 1e3:.2f} ms ({flops / t_bf16 / 1e12:.0f} TFLOP/s), "
        f"bf16/fp8 speed-up x{t_bf16 / t_fp8:.2f}"
    )
    print(
        f"fwd+bwd step {n}^3: fp8 {s_fp8 * 1e3:.2f} ms, bf16 {s_bf16 * 1e3:.2f} ms, "
        f"speed-up x{s_bf16 / s_fp8:.2f}"
    )
    yf = fp8_fwd(x, w)
    yb = bf16_fwd(x, w)
    rel = float(jnp.linalg.norm(yf - yb) / jnp.linalg.norm(yb))
    print(f"relative Frobenius difference fp8 vs bf16 output: {rel:.4f}")


if __name__ == "__main__":
    main()
