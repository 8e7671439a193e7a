"""FP8 numerics benchmark: ratios measured in one run on the current backend.

1. quantize-dequantize and quantize (float8 values + scales) time per granularity / time of a
   plain copy (``x * 2.0``) of the same float32 array, interleaved, median over rounds;
2. FP8 dot step time (forward + both gradients, per granularity) / the same step as a bf16 dot.

On CPU the FP8 paths are emulated (XLA upcasts), so ratios show emulation overhead, not FP8
speed-ups; see gpu_fp8_gemm.py for Hopper. Usage: python benchmarks/bench_fp8.py [--sizes 512 1024]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax

from calclip_jax.fp8 import TensorPrecision, fp8_dot_general, quantize, quantize_dequantize
from calclip_jax.fp8.vocabulary import GRANULARITIES

DN = (((1,), (0,)), ((), ()))


def time_fn(fn: Callable, *args, reps: int = 10) -> float:
    """Median wall seconds of a jitted call (after one warm-up/compile call)."""
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def copy_ratios(fns: dict[str, Callable], x: jax.Array, reps: int, rounds: int = 5) -> dict:
    """Median over interleaved rounds of (time of fn / time of a plain copy), per fn name."""
    copy = jax.jit(lambda v: v * 2.0)
    ratios: dict[str, list[float]] = {name: [] for name in fns}
    copies = []
    for _ in range(rounds):
        copies.append(time_fn(copy, x, reps=reps))
        for name, fn in fns.items():
            ratios[name].append(time_fn(fn, x, reps=reps) / copies[-1])
    return {"copy": statistics.median(copies)} | {
        k: statistics.median(v) for k, v in ratios.items()
    }


def bench_qdq(n: int, reps: int) -> None:
    x = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
    fns = {}
    for gran in GRANULARITIES:
        fns[f"qdq-{gran}"] = jax.jit(lambda v, g=gran: quantize_dequantize(v, "e4m3", g))
        fns[f"q-{gran}"] = jax.jit(lambda v, g=gran: quantize(v, "e4m3", g))
    ratios = copy_ratios(fns, x, reps)
    for kind in ("qdq", "q"):
        row = [f"{kind:>3} {n}x{n}", f"copy {ratios['copy'] * 1e3:8.3f} ms"]
        row += [f"{gran} x{ratios[f'{kind}-{gran}']:5.2f}" for gran in GRANULARITIES]
        print(" | ".join(row))


def _step(dot: Callable) -> Callable:
    def loss(x, w, c):  # random upstream gradient c: nothing for XLA to constant-fold
        return jnp.sum(dot(x, w) * c)

    return jax.jit(jax.value_and_grad(loss, (0, 1)))


def bench_dot(n: int, reps: int) -> None:
    kx, kw, kc = jax.random.split(jax.random.key(1), 3)
    x = jax.random.normal(kx, (n, n), jnp.float32)
    w = jax.random.normal(kw, (n, n), jnp.float32) / n**0.5
    c = jax.random.normal(kc, (n, n), jnp.float32)

    def bf16_dot(a, b):
        a, b = a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)
        return lax.dot_general(a, b, DN, preferred_element_type=jnp.float32)

    bf16_t = time_fn(_step(bf16_dot), x, w, c, reps=reps)
    row = [f"dot step {n}^3", f"bf16 {bf16_t * 1e3:8.3f} ms"]
    for gran in GRANULARITIES:
        p, gp = TensorPrecision("e4m3", gran), TensorPrecision("e5m2", gran)
        fp8 = lambda a, b, p=p, gp=gp: fp8_dot_general(
            a, b, DN, lhs_prec=p, rhs_prec=p, grad_prec=gp
        )
        row.append(f"fp8-{gran} x{time_fn(_step(fp8), x, w, c, reps=reps) / bf16_t:6.2f}")
    print(" | ".join(row))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--qdq-only", action="store_true", help="skip the dot-step part")
    args = parser.parse_args()
    print(f"backend={jax.default_backend()} devices={jax.devices()} jax={jax.__version__}")
    print("E4M3 quantize-dequantize (qdq) and quantize (q) time / plain copy time:")
    for n in args.sizes:
        bench_qdq(n, args.reps)
    if args.qdq_only:
        return
    print("FP8 dot step (fwd + dX + dW; E4M3 fwd, E5M2 grads) time / bf16 dot step time:")
    for n in args.sizes:
        bench_dot(n, args.reps)


if __name__ == "__main__":
    main()
