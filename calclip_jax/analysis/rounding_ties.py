"""How many weights sit on a rounding boundary of a precision: the checkpoint-grid artifact.

A weight exactly halfway between two representable values rounds to even; nudge it by any
amount and it rounds the way it was nudged. If many weights of a checkpoint sit on such ties
(a dequantized Q4_1 GGUF does, for BF16, and for E4M3 under MX's power-of-two scales), a tiny
float32 update moves all of them by half a step in the update's direction, and the low-precision
model moves far more than the float32 one.
"""

from __future__ import annotations

import math

import jax.numpy as jnp

from calclip_jax.fp8.dot import fake_quantize_operand
from calclip_jax.fp8.quantize import expand_scale, quantize
from calclip_jax.fp8.recipe import TensorPrecision

NUDGE = 1e-6  # relative nudge that decides "on a boundary"


def near_tie_share(w_KN: jnp.ndarray, prec: TensorPrecision, nudge: float = NUDGE) -> float:
    """Share of the entries of a dense weight [K, N] that round to different values when nudged
    by -/+ `nudge` (relative), under `prec` as the dense layer would scale them (groups along the
    contraction axis K). Random float32 values give `random_share`; a weight grid aligned with the
    format's gives much more."""
    view = jnp.asarray(w_KN, jnp.float32).T  # [N, K]: contraction last, as fp8.dot lays it out
    if prec.dtype == "bf16":
        x, cast = view, jnp.bfloat16
    else:
        opts = {"pow2_scale": prec.pow2_scale, "margin": prec.margin}
        block = prec.block_shape_for("weights")
        if prec.granularity == "block":
            opts["block_shape"] = block
        scale = quantize(view, prec.jnp_dtype, prec.granularity, axis=-1, **opts).scale
        x = view / expand_scale(scale, view.shape, prec.granularity, -1, block)
        cast = prec.jnp_dtype
    up = (x * (1 + nudge)).astype(cast).astype(jnp.float32)
    down = (x * (1 - nudge)).astype(cast).astype(jnp.float32)
    return float(jnp.mean(up != down))


def exact_share(w_KN: jnp.ndarray, prec: TensorPrecision) -> float:
    """Share of the nonzero entries of a dense weight [K, N] that the forward under `prec`
    represents exactly (a checkpoint grid aligned with the format's leaves them unchanged)."""
    w = jnp.asarray(w_KN, jnp.float32)
    nonzero = w != 0
    same = (as_dense_weight(w, prec) == w) & nonzero
    return float(jnp.sum(same) / jnp.maximum(jnp.sum(nonzero), 1))


def random_share(dtype: str, nudge: float = NUDGE) -> float:
    """The share expected for values spread evenly within binades: 2 nudge / relative step."""
    mantissa_bits = {"bf16": 7, "e4m3": 3, "e5m2": 2}[dtype]
    return 2 * nudge * 2**mantissa_bits / math.log(2)


def as_dense_weight(w_KN: jnp.ndarray, prec: TensorPrecision) -> jnp.ndarray:
    """The weight [K, N] as the dense layer's forward sees it under `prec` (float32)."""
    return fake_quantize_operand(jnp.asarray(w_KN, jnp.float32), prec, (0,), "weights")


def update_gain(
    w0_KN: jnp.ndarray, w1_KN: jnp.ndarray, prec: TensorPrecision
) -> tuple[float, float]:
    """How a float32 update w0 -> w1 reaches the weights the forward uses under `prec`:
    (||Q(w1) - Q(w0)|| / ||w1 - w0||, cosine between the two updates). Rounding noise alone gives
    a gain of many and a cosine near 0; weights on ties that the update nudges all round its way,
    a large gain with a large cosine."""
    d32 = (jnp.asarray(w1_KN, jnp.float32) - jnp.asarray(w0_KN, jnp.float32)).ravel()
    dq = (as_dense_weight(w1_KN, prec) - as_dense_weight(w0_KN, prec)).ravel()
    norm32, normq = float(jnp.linalg.norm(d32)), float(jnp.linalg.norm(dq))
    if norm32 == 0.0 or normq == 0.0:
        return normq / norm32 if norm32 else 0.0, 0.0
    return normq / norm32, float(jnp.dot(d32, dq) / (norm32 * normq))
