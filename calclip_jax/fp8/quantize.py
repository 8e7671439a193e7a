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
from calclip_jax.fp8.grouping import MX_BLOCK, GroupLayout
from calclip_jax.fp8.rounding import round_trip, to_format
from calclip_jax.fp8.vocabulary import GRANULARITIES

F32_MAX = float(jnp.finfo(jnp.float32).max)
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
    return _call(
        _quantize,
        x,
        fmt,
        granularity,
        axis=axis,
        block_shape=block_shape,
        pow2_scale=pow2_scale,
        margin=margin,
        scale=scale,
    )


@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5, 6, 7))
def _quantize(x, scale, dtype, granularity, axis, block_shape, pow2_scale, margin):
    # One compiled computation per config and shape (cheap eager calls; inlined under jit).
    layout = GroupLayout(x.shape, granularity, axis, block_shape)
    groups, scale = _scaled_groups(x, scale, dtype, layout, pow2_scale, margin)
    values = layout.from_groups(to_format(groups, dtype))
    return QuantizedArray(values, scale, granularity, axis, block_shape)


@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5, 6, 7))
def _quantize_dequantize(x, scale, dtype, granularity, axis, block_shape, pow2_scale, margin):
    layout = GroupLayout(x.shape, granularity, axis, block_shape)
    groups, scale = _scaled_groups(x, scale, dtype, layout, pow2_scale, margin)
    return layout.from_groups(round_trip(groups, dtype) * layout.scale_in_view(scale))


def _scaled_groups(x, scale, dtype, layout, pow2_scale, margin):
    """(``clip(x / scale)`` in the group view, the scale in its documented shape)."""
    groups = layout.to_groups(x.astype(jnp.float32))
    amax = layout.amax(groups)
    pow2 = scale is None and (pow2_scale or layout.granularity == "mx")
    if scale is None:
        scale = compute_scale(amax, dtype, margin=margin, pow2_scale=pow2)
    else:  # a given (delayed) scale would saturate inf / NaN inputs into finite values
        scale = poison_nonfinite(jnp.asarray(scale, jnp.float32), amax)
    scale = jnp.asarray(scale, jnp.float32)
    in_view = layout.scale_in_view(scale)
    # x * (1 / s) == x / s exactly for power-of-two s (1 / s is a normal float32: s <= 2**125).
    scaled = groups * (1.0 / in_view) if pow2 else _divide(groups, in_view)
    limit = fmt_max(dtype)
    return jnp.clip(scaled, -limit, limit), scale


def _divide(x: jnp.ndarray, scale: jnp.ndarray) -> jnp.ndarray:
    """``x / scale``, correctly rounded. XLA rewrites a division by a broadcast into a multiply by
    the reciprocal (off by an ulp, and 0 where 1/scale is subnormal); a data-dependent divisor
    (NaN only where x is NaN already) keeps the true division."""
    return x / jnp.where(jnp.isnan(x), jnp.float32(jnp.nan), scale)


@functools.partial(jax.jit, static_argnums=(1,))
def dequantize(qa: QuantizedArray, dtype: Any = jnp.float32) -> jnp.ndarray:
    """Return ``values * scale`` (float32 by default)."""
    axis = qa.axis % qa.values.ndim if qa.granularity in ("channel", "mx") else qa.axis
    layout = GroupLayout(qa.values.shape, qa.granularity, axis, qa.block_shape)
    groups = layout.to_groups(qa.values).astype(dtype)
    return layout.from_groups(groups * layout.scale_in_view(qa.scale).astype(dtype))


def quantize_dequantize(x: jnp.ndarray, fmt: Any, granularity: str = "tensor", **options: Any):
    """Fake-quantize: ``dequantize(quantize(x, fmt, granularity, **options))``, float32, in one
    fused computation (no float8 array in between)."""
    return _call(_quantize_dequantize, x, fmt, granularity, **options)


def _call(
    impl,
    x: jnp.ndarray,
    fmt: Any,
    granularity: str = "tensor",
    *,
    axis: int = -1,
    block_shape: tuple[int, int] = DEFAULT_BLOCK_SHAPE,
    pow2_scale: bool = False,
    margin: float = 0.0,
    scale: jnp.ndarray | None = None,
):
    dtype = resolve_format(fmt)
    block_shape = tuple(int(b) for b in block_shape)
    axis = _check(x, granularity, axis, block_shape)
    return impl(x, scale, dtype, granularity, axis, block_shape, pow2_scale, float(margin))
