"""Scaled FP8 quantization with explicit scales: tensor, channel, block and MX granularities.

Scale convention: ``x_hat = q * s`` with ``s = amax * 2**margin / fmt_max`` (optionally rounded up
to a power of two) and ``q = cast(clip(x / s, -fmt_max, fmt_max))``: always clip before the cast.
Scale shapes:
- "tensor": ``()``.
- "channel": x's shape with ``axis`` reduced to 1 (``axis=-1`` on a 2-D array: one scale per row).
- "block": the last two dims replaced by ``ceil(dim / block)``; ragged edge blocks are partial.
- "mx": blocks of 32 along ``axis``; that axis becomes ``ceil(n / 32)``; scales are exact powers
  of two (E8M0), rounded *up* so a block's amax never saturates.
All-zero groups get scale 1 and give zeros back. Scales are computed as ``amax / fmt_max *
2**margin`` clamped to the largest finite float32 (no inf scale, even for amax near f32 max).
A group whose amax is inf or NaN (the source, or for a given ``scale``, the current ``x``) gets a
NaN scale: the whole group dequantizes to NaN instead of saturating, so an overflow upstream is
never hidden from the update step's non-finite check.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp

from calclip_jax.fp8.formats import (
    MIN_SCALE_EXP,
    fmt_max,
    max_scale_exp,
    resolve_format,
    round_scale_pow2,
)
from calclip_jax.fp8.vocabulary import GRANULARITIES

F32_MAX = float(jnp.finfo(jnp.float32).max)
MX_BLOCK = 32
DEFAULT_BLOCK_SHAPE = (128, 128)


@flax.struct.dataclass
class QuantizedArray:
    """FP8 values (same shape as the source) and float32 scales, plus the layout to expand them."""

    values: jnp.ndarray
    scale: jnp.ndarray
    granularity: str = flax.struct.field(pytree_node=False, default="tensor")
    axis: int = flax.struct.field(pytree_node=False, default=-1)
    block_shape: tuple[int, int] = flax.struct.field(pytree_node=False, default=DEFAULT_BLOCK_SHAPE)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.values.shape


def _check(x: jnp.ndarray, granularity: str, axis: int, block_shape: tuple[int, int]) -> int:
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")
    if granularity == "block":
        if x.ndim < 2:
            raise ValueError(f"block granularity needs ndim >= 2, got shape {x.shape}")
        if len(block_shape) != 2 or min(block_shape) < 1:
            raise ValueError(f"block_shape must be two positive ints, got {block_shape}")
    if granularity in ("channel", "mx"):
        if x.ndim == 0:
            raise ValueError(f"{granularity} granularity needs ndim >= 1")
        return axis % x.ndim
    return axis


def _amax(x: jnp.ndarray, granularity: str, axis: int, block_shape: tuple[int, int]) -> jnp.ndarray:
    """Absolute maximum per scale group, in the scale's shape."""
    ax = jnp.abs(x.astype(jnp.float32))
    if granularity == "tensor":
        return jnp.max(ax)
    if granularity == "channel":
        return jnp.max(ax, axis=axis, keepdims=True)
    if granularity == "mx":
        moved = jnp.moveaxis(ax, axis, -1)
        n = moved.shape[-1]
        nb = math.ceil(n / MX_BLOCK)
        pad = [(0, 0)] * (moved.ndim - 1) + [(0, nb * MX_BLOCK - n)]
        blocks = jnp.pad(moved, pad).reshape(*moved.shape[:-1], nb, MX_BLOCK)
        return jnp.moveaxis(jnp.max(blocks, axis=-1), -1, axis)
    br, bc = block_shape
    r, c = ax.shape[-2:]
    nr, nc = math.ceil(r / br), math.ceil(c / bc)
    pad = [(0, 0)] * (ax.ndim - 2) + [(0, nr * br - r), (0, nc * bc - c)]
    blocks = jnp.pad(ax, pad).reshape(*ax.shape[:-2], nr, br, nc, bc)
    return jnp.max(blocks, axis=(-3, -1))


def expand_scale(
    scale: jnp.ndarray,
    shape: tuple[int, ...],
    granularity: str,
    axis: int = -1,
    block_shape: tuple[int, int] = DEFAULT_BLOCK_SHAPE,
) -> jnp.ndarray:
    """Broadcast a scale array to the full data shape (repeat over blocks, crop ragged edges)."""
    if granularity in ("tensor", "channel"):
        return jnp.broadcast_to(scale, shape)
    if granularity == "mx":
        axis = axis % len(shape)
        rep = jnp.repeat(scale, MX_BLOCK, axis=axis)
        return jnp.take(rep, jnp.arange(shape[axis]), axis=axis)
    br, bc = block_shape
    rep = jnp.repeat(jnp.repeat(scale, br, axis=-2), bc, axis=-1)
    return rep[..., : shape[-2], : shape[-1]]


def compute_scale(
    amax: jnp.ndarray, fmt: Any, *, margin: float = 0.0, pow2_scale: bool = False
) -> jnp.ndarray:
    """Scale mapping ``amax`` to the format max (times ``2**margin``), finite for finite amax;
    1 for all-zero groups, NaN where amax is inf or NaN."""
    amax = jnp.asarray(amax, jnp.float32)
    # Divide first, then clamp: amax * 2**margin alone overflows for amax > f32 max / 2**margin.
    scale = amax / fmt_max(fmt) * (2.0**margin)
    scale = jnp.clip(scale, 2.0**MIN_SCALE_EXP, F32_MAX)
    if pow2_scale:
        # Cap so that fmt_max * scale stays finite in float32 (matters only near f32 max).
        scale = round_scale_pow2(scale, max_scale_exp(fmt))
    scale = jnp.where(amax > 0, scale, jnp.ones_like(scale))
    return poison_nonfinite(scale, amax)


def poison_nonfinite(scale: jnp.ndarray, amax: jnp.ndarray) -> jnp.ndarray:
    """``scale`` where ``amax`` is finite, NaN elsewhere (broadcast to amax's shape)."""
    return jnp.where(jnp.isfinite(amax), scale, jnp.float32(jnp.nan))


def quantize(
    x: jnp.ndarray,
    fmt: Any,
    granularity: str = "tensor",
    *,
    axis: int = -1,
    block_shape: tuple[int, int] = DEFAULT_BLOCK_SHAPE,
    pow2_scale: bool = False,
    margin: float = 0.0,
    scale: jnp.ndarray | None = None,
) -> QuantizedArray:
    """Quantize ``x`` to FP8 with explicit float32 scales (see module docstring for shapes).

    ``scale`` (e.g. a delayed-scaling scale) replaces the one computed from the current amax.
    """
    dtype = resolve_format(fmt)
    block_shape = tuple(int(b) for b in block_shape)
    axis = _check(x, granularity, axis, block_shape)
    return _quantize(x, scale, dtype, granularity, axis, block_shape, pow2_scale, float(margin))


@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5, 6, 7))
def _quantize(x, scale, dtype, granularity, axis, block_shape, pow2_scale, margin):
    # One compiled computation per config and shape (cheap eager calls; inlined under jit).
    amax = _amax(x, granularity, axis, block_shape)
    if scale is None:
        pow2 = pow2_scale or granularity == "mx"
        scale = compute_scale(amax, dtype, margin=margin, pow2_scale=pow2)
    else:  # a given (delayed) scale would saturate inf / NaN inputs into finite values
        scale = poison_nonfinite(jnp.asarray(scale, jnp.float32), amax)
    scale = jnp.asarray(scale, jnp.float32)
    full = expand_scale(scale, x.shape, granularity, axis, block_shape)
    limit = fmt_max(dtype)
    values = jnp.clip(x.astype(jnp.float32) / full, -limit, limit).astype(dtype)
    return QuantizedArray(values, scale, granularity, axis, block_shape)


@functools.partial(jax.jit, static_argnums=(1,))
def dequantize(qa: QuantizedArray, dtype: Any = jnp.float32) -> jnp.ndarray:
    """Return ``values * scale`` (float32 by default)."""
    full = expand_scale(qa.scale, qa.values.shape, qa.granularity, qa.axis, qa.block_shape)
    return qa.values.astype(dtype) * full.astype(dtype)


def quantize_dequantize(x: jnp.ndarray, fmt: Any, granularity: str = "tensor", **options: Any):
    """Fake-quantize: ``dequantize(quantize(x, fmt, granularity, **options))``, float32."""
    return dequantize(quantize(x, fmt, granularity, **options))
