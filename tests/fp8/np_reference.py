"""Straightforward NumPy reference for FP8 scales and error bounds (used by the fp8 tests)."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

FORMATS = {
    "e4m3": (ml_dtypes.float8_e4m3fn, 448.0, 3, 2.0**-9),
    "e5m2": (ml_dtypes.float8_e5m2, 57344.0, 2, 2.0**-16),
    "e2m1": (ml_dtypes.float4_e2m1fn, 6.0, 1, 0.5),  # 4-bit: the study's coarsest rung
}


def group_amax(x, granularity, axis=-1, block_shape=(128, 128)):
    ax = np.abs(np.asarray(x, np.float32))
    if granularity == "tensor":
        return np.array(ax.max(), np.float32)
    if granularity == "channel":
        return ax.max(axis=axis, keepdims=True)
    if granularity == "mx":
        moved = np.moveaxis(ax, axis, -1)
        n = moved.shape[-1]
        out = np.stack([moved[..., i : i + 32].max(-1) for i in range(0, n, 32)], axis=-1)
        return np.moveaxis(out, -1, axis)
    br, bc = block_shape
    r, c = ax.shape[-2:]
    out = np.zeros((*ax.shape[:-2], math.ceil(r / br), math.ceil(c / bc)), np.float32)
    for i in range(out.shape[-2]):
        for j in range(out.shape[-1]):
            out[..., i, j] = ax[..., i * br : (i + 1) * br, j * bc : (j + 1) * bc].max((-2, -1))
    return out


def scale(x, fmt, granularity, axis=-1, block_shape=(128, 128), pow2=False, margin=0.0):
    amax = group_amax(x, granularity, axis, block_shape).astype(np.float64)
    s = amax * 2.0**margin / FORMATS[fmt][1]
    s = np.maximum(s, 2.0**-126)
    if pow2 or granularity == "mx":
        top = 128 - math.ceil(math.log2(FORMATS[fmt][1]))  # fmt_max * s finite in float32
        s = 2.0 ** np.clip(np.ceil(np.log2(s)), -126, top)
    return np.where(amax > 0, s, 1.0).astype(np.float32)


def expand(s, shape, granularity, axis=-1, block_shape=(128, 128)):
    s = np.asarray(s)
    if granularity in ("tensor", "channel"):
        return np.broadcast_to(s, shape)
    if granularity == "mx":
        axis %= len(shape)
        return np.take(np.repeat(s, 32, axis=axis), np.arange(shape[axis]), axis=axis)
    br, bc = block_shape
    return np.repeat(np.repeat(s, br, -2), bc, -1)[..., : shape[-2], : shape[-1]]


def elem_error_bound(x, s_full, fmt):
    """|x_hat - x| <= u |x| + (smallest_subnormal / 2) s, plus float32 rounding slack."""
    _, _, mant, sub = FORMATS[fmt]
    u = 2.0 ** -(mant + 1)
    eps = 2.0**-23
    return (u + 4 * eps) * np.abs(x) + (sub / 2) * np.asarray(s_full) * (1 + eps)
