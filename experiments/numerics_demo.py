"""Quantization error of every FP8 format x scaling granularity on a realistic weight matrix.

Run: ``python -m experiments.numerics_demo``. Prints a table; no data is downloaded.
The matrix mimics an LLM projection: Gaussian weights with a few outlier input channels, which is
what makes coarse (per-tensor) scales lose precision on the bulk of the values.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

from calclip_jax import fp8
from calclip_jax.fp8.vocabulary import FORMATS, GRANULARITIES, SCALED_FORMATS

_ROWS = flags.DEFINE_integer("rows", 1024, "Rows (input features) of the demo weight matrix.")
_COLS = flags.DEFINE_integer("cols", 1024, "Columns (output features) of the demo weight matrix.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the demo matrix.")

GRANULARITY_OPTIONS: dict[str, dict] = {  # quantize options per granularity (default: none)
    "channel": {"axis": -1},
    "block": {"block_shape": (128, 128)},
    "mx": {"axis": -1},
}


def realistic_matrix(rows: int, cols: int, seed: int, outlier_scale: float) -> np.ndarray:
    """Gaussian matrix (std 0.02) with 1% of its columns scaled up `outlier_scale` times.

    outlier_scale 20 looks like a projection weight; ~300 like LLM activations, whose few
    outlier features dominate a per-tensor amax.
    """
    rng = np.random.default_rng(seed)
    w = rng.normal(0.0, 0.02, size=(rows, cols)).astype(np.float32)
    outliers = rng.choice(cols, size=max(1, cols // 100), replace=False)
    w[:, outliers] *= outlier_scale
    return w


def error_row(w: jax.Array, fmt, granularity: str, options: dict) -> dict[str, float]:
    """Relative Frobenius error, median element relative error and flush-to-zero share."""
    w_hat = jax.jit(lambda x: fp8.quantize_dequantize(x, fmt, granularity, **options))(w)
    w_hat.block_until_ready()
    err = jnp.abs(w_hat - w)
    nonzero = jnp.abs(w) > 0
    rel = jnp.where(nonzero, err / jnp.where(nonzero, jnp.abs(w), 1.0), 0.0)
    return {
        "rel_fro": float(jnp.linalg.norm(err) / jnp.linalg.norm(w)),
        "median_rel": float(jnp.median(rel)),
        "zero_frac": float(jnp.mean((w_hat == 0) & nonzero)),
    }


def print_table(w: jax.Array, title: str) -> None:
    """One row per (format, granularity); channel = one scale per row, mx = 1x32 blocks."""
    bf16_err = jnp.linalg.norm(w.astype(jnp.bfloat16).astype(jnp.float32) - w) / jnp.linalg.norm(w)
    amax = float(jnp.abs(w).max())
    print(f"{title}: {w.shape}, std {float(w.std()):.4f}, max |x| {amax:.3f}")
    print(f"  bf16 cast reference: rel_fro {float(bf16_err):.2e}")
    header = f"  {'format':<8} {'granularity':<12} {'rel_fro':>9} {'median_rel':>11} {'flushed':>8}"
    print(header)
    print("  " + "-" * (len(header) - 2))
    for name in SCALED_FORMATS:  # e2m1 (FP4): the study's coarsest rung
        for granularity in GRANULARITIES:
            options = GRANULARITY_OPTIONS.get(granularity, {})
            row = error_row(w, FORMATS[name], granularity, options)
            print(
                f"  {name:<8} {granularity:<12} {row['rel_fro']:>9.2e} {row['median_rel']:>11.2e}"
                f" {row['zero_frac']:>8.2%}"
            )
    print()


def main(argv: list[str]) -> None:
    del argv
    start = time.perf_counter()
    shape = (_ROWS.value, _COLS.value)
    for title, outlier_scale in (("weight-like", 20.0), ("activation-like", 300.0)):
        w = jnp.asarray(realistic_matrix(*shape, _SEED.value, outlier_scale))
        print_table(w, f"{title} matrix (1% of columns x{outlier_scale:g})")
    print("rel_fro: |x_hat - x|_F / |x|_F; median_rel: median elementwise relative error;")
    print("flushed: share of nonzero elements quantized to 0.")
    print(f"done in {time.perf_counter() - start:.1f}s on {jax.devices()[0].platform}")


if __name__ == "__main__":
    app.run(main)
