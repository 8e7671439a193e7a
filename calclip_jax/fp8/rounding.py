"""Float32 -> FP8/FP4 rounding with integer bit tricks: XLA-CPU's native convert to float8 is slow.

For ``y`` already clipped to ``[-fmt_max, fmt_max]`` (or NaN), ``round_trip(y, dtype)`` equals
``y.astype(dtype).astype(float32)`` and ``to_format(y, dtype)`` equals ``y.astype(dtype)``, bit for
bit: round-to-nearest-even onto the format's grid, subnormals included, signed zeros kept, NaN to
the format's NaN (float4_e2m1fn has none: NaN becomes -0, as XLA's convert does).

The trick: with ``c = 2**(max(exponent(|y|), emin) + 23 - mantissa_bits)``, the float32 sum
``|y| + c`` keeps exactly the format's quantum below ``c``'s leading bit, so the hardware add rounds
``|y|`` to the grid (ties to even) and ``(|y| + c) - c`` is exact; the integer difference of the
two bit patterns is the format's mantissa count. Accelerators keep their native convert
(``lax.platform_dependent``): only the CPU lowering uses these integer paths.
"""

from __future__ import annotations

import dataclasses
import functools

import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

_SIGN = np.uint32(0x80000000)
_ABS = np.uint32(0x7FFFFFFF)
_EXP = np.uint32(0x7F800000)
_F32_MANT = 23
_F32_BIAS = 127


@dataclasses.dataclass(frozen=True)
class FormatGrid:
    """Bit layout of a float8 / float4 format, as needed to round and encode."""

    mantissa_bits: int
    min_normal_exp: int
    sign_shift: int  # position of the sign bit in the stored code
    nan_code: int  # stored code of +NaN (float4_e2m1fn: -0, XLA's convert of NaN)
    code_dtype: np.dtype  # unsigned integer of the format's width

    @property
    def min_magic_bits(self) -> np.uint32:
        """float32 bits of the magic addend for the subnormal range, 2**(emin + 23 - m)."""
        exp = self.min_normal_exp + _F32_MANT - self.mantissa_bits + _F32_BIAS
        return np.uint32(exp << _F32_MANT)


@functools.cache
def format_grid(dtype: np.dtype) -> FormatGrid:
    """The grid of ``float8_e4m3fn``, ``float8_e5m2`` or ``float4_e2m1fn``."""
    info = ml_dtypes.finfo(dtype)
    if dtype == np.dtype(ml_dtypes.float4_e2m1fn):
        return FormatGrid(int(info.nmant), int(info.minexp), 3, 1 << 3, np.dtype(ml_dtypes.uint4))
    nan_code = int(np.array(np.nan, np.float32).astype(dtype).view(np.uint8))
    return FormatGrid(int(info.nmant), int(info.minexp), 7, nan_code, np.dtype(np.uint8))


def _magic_add(y: jnp.ndarray, grid: FormatGrid) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """(bits of y, bits of the magic addend c, bits of |y| + c rounded onto the grid)."""
    bits = lax.bitcast_convert_type(y.astype(jnp.float32), jnp.uint32)
    mag = bits & _ABS
    magic = jnp.maximum(mag & _EXP, _exp_floor(grid)) + _magic_offset(grid)
    as_f32 = functools.partial(lax.bitcast_convert_type, new_dtype=jnp.float32)
    total = as_f32(mag) + as_f32(magic)
    return bits, magic, lax.bitcast_convert_type(total, jnp.uint32)


def _exp_floor(grid: FormatGrid) -> np.uint32:
    """float32 exponent bits of the format's smallest normal power of two."""
    return np.uint32((grid.min_normal_exp + _F32_BIAS) << _F32_MANT)


def _magic_offset(grid: FormatGrid) -> np.uint32:
    """Exponent-bits offset from |y|'s power of two to the magic addend's."""
    return np.uint32((_F32_MANT - grid.mantissa_bits) << _F32_MANT)


def round_to_grid_bits(y: jnp.ndarray, dtype: np.dtype) -> jnp.ndarray:
    """float32 ``y`` rounded (ties to even) onto the format's grid, by integer and add tricks."""
    grid = format_grid(np.dtype(dtype))
    bits, magic, total = _magic_add(y, grid)
    as_f32 = functools.partial(lax.bitcast_convert_type, new_dtype=jnp.float32)
    mag = as_f32(total) - as_f32(magic)
    out = as_f32(lax.bitcast_convert_type(mag, jnp.uint32) | (bits & _SIGN))
    if grid.nan_code == 1 << grid.sign_shift:  # no NaN in the format: NaN -> -0
        out = jnp.where(jnp.isnan(y), jnp.float32(-0.0), out)
    return out


def encode_bits(y: jnp.ndarray, dtype: np.dtype) -> jnp.ndarray:
    """float32 ``y`` as the format's dtype (same rounding), built bit by bit and bitcast."""
    grid = format_grid(np.dtype(dtype))
    bits, magic, total = _magic_add(y, grid)
    count = total - magic  # mantissa count above the magic addend's grid
    binade = (magic - grid.min_magic_bits) >> np.uint32(_F32_MANT - grid.mantissa_bits)
    sign = (bits >> np.uint32(31)) << np.uint32(grid.sign_shift)
    code = (count + binade) | sign
    if grid.nan_code == 1 << grid.sign_shift:
        nan = np.uint32(grid.nan_code)
    else:
        nan = np.uint32(grid.nan_code) | sign
    code = jnp.where(jnp.isnan(y), nan, code)
    return lax.bitcast_convert_type(code.astype(grid.code_dtype), dtype)


def to_format(y: jnp.ndarray, dtype: np.dtype) -> jnp.ndarray:
    """``y.astype(dtype)`` for clipped float32 ``y``: bit tricks on CPU, native elsewhere."""
    return lax.platform_dependent(
        y,
        cpu=lambda v: encode_bits(v, dtype),
        default=lambda v: v.astype(dtype),
    )


def round_trip(y: jnp.ndarray, dtype: np.dtype) -> jnp.ndarray:
    """``y.astype(dtype).astype(float32)`` for clipped float32 ``y`` (CPU: no float8 at all)."""
    return lax.platform_dependent(
        y,
        cpu=lambda v: round_to_grid_bits(v, dtype),
        default=lambda v: v.astype(dtype).astype(jnp.float32),
    )
