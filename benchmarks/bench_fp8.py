"""FP8 numerics benchmark: ratios measured in one run on the current backend.

1. quantize-dequantize and quantize (float8 values + scales) time per granularity / time of a
   plain copy (``x * 2.0``) of the same float32 array, interleaved, median over rounds;
2. FP8 dot step time (forward + both gradients, per granularity) / the same step as a bf16 dot,
   and each compiled step's scratch memory (XLA temp buffers) in [n, n] float32 arrays.

On CPU the FP8 paths are emulated (XLA upcasts), so ratios show emulation overhead, not FP8
speed-ups; see gpu_run.py for Hopper. Usage: python -m benchmarks.bench_fp8 [--sizes=512,1024]
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

import jax
import jax.numpy as jnp
from absl import app, flags
from jax import lax

from benchmarks.timing import time_calls
from calclip_jax.fp8 import TensorPrecision, fp8_dot_general, quantize, quantize_dequantize
from calclip_jax.fp8.vocabulary import GRANULARITIES

_SIZES = flags.DEFINE_list("sizes", ["256", "512", "1024"], "Matrix sizes n (n x n, n^3 dots).")
_REPS = flags.DEFINE_integer("reps", 10, "Timed calls per program (median, after one warm-up).")
_QDQ_ONLY = flags.DEFINE_bool("qdq-only", False, "Skip the dot-step part.")

DN = (((1,), (0,)), ((), ()))


def copy_ratios(fns: dict[str, Callable], x: jax.Array, reps: int, rounds: int = 5) -> dict:
    """Median over interleaved rounds of (time of fn / time of a plain copy), per fn name."""
    copy = jax.jit(lambda v: v * 2.0)
    ratios: dict[str, list[float]] = {name: [] for name in fns}
    copies = []
    for _ in range(rounds):
        copies.append(time_calls(copy, x, reps=reps))
        for name, fn in fns.items():
            ratios[name].append(time_calls(fn, x, reps=reps) / copies[-1])
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

    steps = {"bf16": _step(bf16_dot).lower(x, w, c).compile()}
    for gran in GRANULARITIES:
        p, gp = TensorPrecision("e4m3", gran), TensorPrecision("e5m2", gran)
        fp8 = lambda a, b, p=p, gp=gp: fp8_dot_general(
            a, b, DN, lhs_prec=p, rhs_prec=p, grad_prec=gp
        )
        steps[f"fp8-{gran}"] = _step(fp8).lower(x, w, c).compile()
    bf16_t = time_calls(steps["bf16"], x, w, c, reps=reps)
    row = [f"dot step {n}^3", f"bf16 {bf16_t * 1e3:8.3f} ms"]
    for name, step in list(steps.items())[1:]:
        row.append(f"{name} x{time_calls(step, x, w, c, reps=reps) / bf16_t:6.2f}")
    print(" | ".join(row))
    # XLA's scratch (temp buffers) of each compiled step, in [n, n] float32 arrays.
    row = [f"dot step {n}^3 scratch / [n, n] f32"]
    for name, step in steps.items():
        row.append(f"{name} {step.memory_analysis().temp_size_in_bytes / (4 * n * n):.2f}")
    print(" | ".join(row))


def main(argv: list[str]) -> None:
    if len(argv) > 1:  # e.g. argparse's `--sizes 1024 4096`: absl takes lists comma-separated
        raise app.UsageError(f"unexpected arguments {argv[1:]}; flags are --flag=value")
    sizes = [int(n) for n in _SIZES.value]
    print(f"backend={jax.default_backend()} devices={jax.devices()} jax={jax.__version__}")
    print("E4M3 quantize-dequantize (qdq) and quantize (q) time / plain copy time:")
    for n in sizes:
        bench_qdq(n, _REPS.value)
    if _QDQ_ONLY.value:
        return
    print("FP8 dot step (fwd + dX + dW; E4M3 fwd, E5M2 grads) time / bf16 dot step time:")
    for n in sizes:
        bench_dot(n, _REPS.value)


if __name__ == "__main__":
    app.run(main)
