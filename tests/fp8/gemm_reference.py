"""Float64 references of the FP8 GEMMs: the dot of the quantized operands, dequantized, and the
float32 error bound of a GEMM against it (used by the fp8 GEMM tests)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from calclip_jax.fp8 import dequantize, quantize

F32_MAX = float(np.finfo(np.float32).max)


def emulated(view_rk: np.ndarray, fmt, gran: str, block=(128, 128)) -> np.ndarray:
    """A [R, K] view quantized along K and dequantized (float64)."""
    opts = {"block_shape": block} if gran == "block" else {}
    qa = quantize(jnp.asarray(view_rk)[None], fmt, gran, axis=-1, **opts)
    return np.asarray(dequantize(qa), np.float64)[0]


def gemm_slack(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Bound on |float32 GEMM - a @ b| for float64 operands exact in float32: float32 rounding of
    the K-long accumulation and of the scale products, relative to sum |a||b| (plus the float32
    normal range's floor, for outputs that XLA may flush to zero)."""
    return 4 * (a.shape[1] + 4) * 2.0**-24 * (np.abs(a) @ np.abs(b)) + 2.0**-120


def assert_close(got, a: np.ndarray, b: np.ndarray) -> None:
    """|got - a b| within ``gemm_slack``."""
    err = np.abs(np.asarray(got, np.float64) - a @ b)
    assert np.all(err <= gemm_slack(a, b)), float(np.max(err - gemm_slack(a, b)))


def assert_matches_reference(got, a: np.ndarray, b: np.ndarray) -> None:
    """Near float32 max: where every partial sum of a @ b fits in float32 (sum |a||b| does),
    ``got`` is within ``gemm_slack`` of a @ b; where the exact output overflows float32 by more
    than that slack, ``got`` is not finite (inf, or NaN where chunk partials overflow both
    ways); in between (partial sums beyond float32 max that cancel), anything."""
    got = np.asarray(got, np.float64)
    want, bound, slack = a @ b, np.abs(a) @ np.abs(b), gemm_slack(a, b)
    fits = bound * (1 + 2.0**-10) <= F32_MAX
    err = np.abs(got - want)
    assert np.all(err[fits] <= slack[fits]), (got[fits], want[fits])
    over = np.abs(want) - slack >= F32_MAX * (1 + 2.0**-10)
    assert not np.any(np.isfinite(got[over])), (got[over], want[over])
