"""FP8 formats (float8_e4m3fn, float8_e5m2 via ml_dtypes/jnp) and E8M0 power-of-two scales.

The 4-bit float4_e2m1fn ("e2m1", 1 mantissa bit, max 6) goes through the same code: it is the
coarser-than-FP8 rung of the study's precision ladder (what does it take to make RL unstable?).
"""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp
import numpy as np

from calclip_jax.fp8.vocabulary import FORMATS, SCALED_FORMATS

_FP8_DTYPES = tuple(np.dtype(FORMATS[name]) for name in SCALED_FORMATS)

# E8M0 (OCP MX shared scale): 8-bit biased exponent, value 2**(e - 127); 255 is NaN.
E8M0_BIAS = 127
# Smallest scale we ever produce: the smallest *normal* float32 (XLA on CPU may flush subnormals).
MIN_SCALE_EXP = -126
MAX_SCALE_EXP = 127


def resolve_format(fmt: Any) -> np.dtype:
    """Return the numpy dtype for a jnp float8/float4 dtype/type or "e4m3" / "e5m2" / "e2m1"."""
    if isinstance(fmt, str):
        if fmt not in SCALED_FORMATS:
            raise ValueError(f"fmt must be one of {sorted(SCALED_FORMATS)} or a jnp float8 dtype")
        return np.dtype(FORMATS[fmt])
    try:
        dtype = np.dtype(fmt)
    except TypeError as err:
        raise ValueError(f"unsupported FP8 format {fmt!r}") from err
    if dtype not in _FP8_DTYPES:
        raise ValueError(
            f"unsupported FP8 format {dtype}; use float8_e4m3fn, float8_e5m2 or float4_e2m1fn"
        )
    return dtype


def fmt_max(fmt: Any) -> float:
    """Largest finite value of the format (448 for E4M3, 57344 for E5M2, 6 for E2M1)."""
    return float(jnp.finfo(resolve_format(fmt)).max)


def mantissa_bits(fmt: Any) -> int:
    """Explicit mantissa bits (3 for E4M3, 2 for E5M2, 1 for E2M1)."""
    return int(jnp.finfo(resolve_format(fmt)).nmant)


def to_e8m0(scale: jnp.ndarray) -> jnp.ndarray:
    """Encode exact power-of-two float32 scales as E8M0 biased exponents (uint8)."""
    _, exp = jnp.frexp(scale.astype(jnp.float32))  # scale = 0.5 * 2**exp
    return jnp.clip(exp - 1 + E8M0_BIAS, 0, 254).astype(jnp.uint8)


def from_e8m0(code: jnp.ndarray) -> jnp.ndarray:
    """Decode E8M0 biased exponents (uint8) into float32 powers of two."""
    return jnp.ldexp(jnp.ones(code.shape, jnp.float32), code.astype(jnp.int32) - E8M0_BIAS)


def max_scale_exp(fmt: Any) -> int:
    """Largest power-of-two scale exponent e with ``fmt_max * 2**e`` finite in float32."""
    return 128 - math.ceil(math.log2(fmt_max(fmt)))


def round_scale_pow2(scale: jnp.ndarray, max_exp: int = MAX_SCALE_EXP) -> jnp.ndarray:
    """Round positive scales *up* to a power of two (exact, via frexp), clamped to
    ``[2**MIN_SCALE_EXP, 2**max_exp]`` (within E8M0's range).

    Rounding up never makes x / scale overflow the format, so amax still fits after rounding.
    """
    scale = jnp.maximum(scale, 2.0**MIN_SCALE_EXP)  # no subnormals (may be flushed to zero)
    mant, exp = jnp.frexp(scale)  # scale = mant * 2**exp, mant in [0.5, 1)
    exp = jnp.where(mant == 0.5, exp - 1, exp)
    exp = jnp.clip(exp, MIN_SCALE_EXP, max_exp)
    return jnp.ldexp(jnp.ones_like(scale), exp)
