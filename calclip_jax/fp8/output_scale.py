"""Two operand scales applied to a GEMM's float32 output without a spurious overflow.

``dot * (s_a * s_b)`` overflows when ``s_a * s_b`` does (amax_a * amax_b above ~6.9e43 for E4M3)
and ``(dot * s_a) * s_b`` when ``dot * s_a`` does (a large s_a, a small s_b), though the output
may be finite either way. Each scale is split exactly as ``s = m * r**2`` (``m`` in [1, 4), ``r``
a power of two), and the output is ``((dot * (m_a * m_b)) * g) * g`` with ``g = r_a * r_b``:
the two multiplications by ``g`` are exact and move the magnitude monotonically to the output's,
so the result overflows only where the output itself does. In float32's normal range it is bit
for bit ``dot * (s_a * s_b)`` (powers of two do not change a product's rounding).
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

SplitScale = tuple[jnp.ndarray, jnp.ndarray]  # (mantissa in [1, 4), power-of-two root)


def split_scale(scale: jnp.ndarray) -> SplitScale:
    """``(m, r)`` with ``scale = m * r**2`` exactly, ``r = 2**h`` (h in [-63, 63]) and ``m`` in
    [1, 4) for a normal float32 scale (below 1 for a subnormal one; zero, inf and NaN stay in
    ``m``). Integer bit arithmetic only: cheap enough to run per K chunk."""
    s = scale.astype(jnp.float32)
    biased = (lax.bitcast_convert_type(s, jnp.int32) >> 23) & 0xFF  # the biased exponent
    half = jnp.clip((biased - 127) >> 1, -63, 63)  # floor(exponent / 2)
    return s * _pow2(-2 * half), _pow2(half)


def _pow2(exponent: jnp.ndarray) -> jnp.ndarray:
    """``2.0**exponent`` for int32 exponents in [-126, 127], built from its bits."""
    return lax.bitcast_convert_type((exponent + 127) << 23, jnp.float32)


def apply_scales(dot: jnp.ndarray, a: SplitScale, b: SplitScale) -> jnp.ndarray:
    """``dot * s_a * s_b`` for split scales broadcastable to ``dot`` (see the module docstring)."""
    (ma, ra), (mb, rb) = a, b
    g = ra * rb  # exact: a power of two in [2**-126, 2**126]
    return ((dot * (ma * mb)) * g) * g
