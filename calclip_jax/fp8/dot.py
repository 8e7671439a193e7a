"""FP8 ``dot_general`` for training (``jax.custom_vjp``), float32 accumulation.

Forward: each operand is quantized per its ``TensorPrecision`` with scale groups laid out along
its *contraction* axes (the scaled matmul is then exact in structure): activations [..., K] get
per-token ("channel"), 1x128 ("block") or 1x32 E8M0 ("mx") groups along K; weights [K, N] get
per-output-column, 128x128 or 32-along-K groups. Block shapes are (rows, contraction) in the
operand's contraction-last view. Per-tensor (granularity "tensor") operands are written as
``dot(convert(q) * s, convert(q) * s)`` with scalar scales, the pattern XLA-GPU rewrites into a
cuBLASLt FP8 GEMM; finer granularities are emulated (dequantize, then an f32 dot).

Backward: the incoming gradient is quantized per ``grad_prec`` (E5M2 by default), with groups
along the contraction axes of each backward GEMM (so it is quantized once per tensor, twice
otherwise), and both operand gradients are computed against the *forward-quantized*
operands (reused, as in Transformer Engine / flax fp8_ops), i.e. both backward GEMMs have FP8
operands. A delayed-scaling gradient scale comes from ``grad_amax_history``; the updated history is
returned as that argument's "gradient" (overwrite-with-gradient, see ``delayed.merge_fp8_meta``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from calclip_jax.fp8.delayed import scale_from_history, update_history
from calclip_jax.fp8.quantize import QuantizedArray, dequantize, quantize, quantize_dequantize
from calclip_jax.fp8.recipe import TensorPrecision
from calclip_jax.fp8.vocabulary import OPERAND_ROLES

DimensionNumbers = tuple[tuple[tuple[int, ...], tuple[int, ...]], tuple[tuple[int, ...], ...]]
E4M3 = TensorPrecision("e4m3", "tensor")
E5M2 = TensorPrecision("e5m2", "tensor")


def _per_tensor(prec: TensorPrecision) -> bool:
    return prec.is_fp8 and prec.granularity == "tensor"


def quantize_operand(
    x: jnp.ndarray,
    prec: TensorPrecision,
    contract_axes: tuple[int, ...],
    role: str,
    scale: jnp.ndarray | None = None,
) -> QuantizedArray | jnp.ndarray:
    """Quantize a matmul operand per ``prec`` with scale groups along ``contract_axes``;
    ``role`` (one of ``OPERAND_ROLES``) picks the default block shape.

    Returns a per-tensor ``QuantizedArray`` (kept as FP8 + scalar scale so the GEMM pattern
    survives) or the fake-quantized float32 array for every other precision.
    """
    if prec.dtype == "fp32":
        return x.astype(jnp.float32)
    if prec.dtype == "bf16":
        return x.astype(jnp.bfloat16).astype(jnp.float32)
    opts = {"pow2_scale": prec.pow2_scale, "margin": prec.margin}
    if _per_tensor(prec):
        return quantize(x, prec.jnp_dtype, "tensor", scale=scale, **opts)
    contract = tuple(a % x.ndim for a in contract_axes)
    free = tuple(a for a in range(x.ndim) if a not in contract)
    moved = jnp.transpose(x, free + contract)
    k = math.prod(x.shape[a] for a in contract)
    free_shape = tuple(x.shape[a] for a in free) or (1,)
    view = moved.reshape(*free_shape, k)
    if prec.granularity == "block":
        opts["block_shape"] = prec.block_shape_for(role)
    fq = quantize_dequantize(view, prec.jnp_dtype, prec.granularity, axis=-1, **opts)
    perm = free + contract
    return jnp.transpose(fq.reshape(moved.shape), tuple(perm.index(a) for a in range(x.ndim)))


def _materialize(x: QuantizedArray | jnp.ndarray) -> jnp.ndarray:
    return dequantize(x) if isinstance(x, QuantizedArray) else x


@dataclasses.dataclass(frozen=True)
class _Config:
    dimension_numbers: DimensionNumbers
    lhs_prec: TensorPrecision
    rhs_prec: TensorPrecision
    grad_prec: TensorPrecision
    lhs_role: str
    rhs_role: str
    has_lhs_scale: bool
    has_rhs_scale: bool

    def axes(self, ndim_lhs: int, ndim_rhs: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Output positions of lhs-free and rhs-free dims (the backward contraction axes of g)."""
        (lc, rc), (lb, rb) = self.dimension_numbers
        nb = len(lb)
        nl = ndim_lhs - len(lc) - nb
        nr = ndim_rhs - len(rc) - len(rb)
        return tuple(range(nb, nb + nl)), tuple(range(nb + nl, nb + nl + nr))


def _precision(a: TensorPrecision, b: TensorPrecision) -> lax.Precision:
    # DEFAULT keeps the per-tensor FP8 GEMM pattern; emulated paths use exact f32 (no TF32).
    both = _per_tensor(a) and _per_tensor(b)
    return lax.Precision.DEFAULT if both else lax.Precision.HIGHEST


def _forward(cfg: _Config, lhs, rhs, lhs_scale, rhs_scale):
    (lc, rc), _ = cfg.dimension_numbers
    ls = lhs_scale if cfg.has_lhs_scale else None
    rs = rhs_scale if cfg.has_rhs_scale else None
    ql = quantize_operand(lhs, cfg.lhs_prec, lc, cfg.lhs_role, ls)
    qr = quantize_operand(rhs, cfg.rhs_prec, rc, cfg.rhs_role, rs)
    out = lax.dot_general(
        _materialize(ql),
        _materialize(qr),
        cfg.dimension_numbers,
        precision=_precision(cfg.lhs_prec, cfg.rhs_prec),
        preferred_element_type=jnp.float32,
    )
    return out, ql, qr


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _fp8_dot(cfg: _Config, lhs, rhs, lhs_scale, rhs_scale, grad_history):
    return _forward(cfg, lhs, rhs, lhs_scale, rhs_scale)[0]


def _fp8_dot_fwd(cfg, lhs, rhs, lhs_scale, rhs_scale, grad_history):
    out, ql, qr = _forward(cfg, lhs, rhs, lhs_scale, rhs_scale)
    zeros = (jnp.zeros_like(lhs_scale), jnp.zeros_like(rhs_scale))
    dtypes = (jnp.zeros((), lhs.dtype), jnp.zeros((), rhs.dtype))
    return out, (ql, qr, zeros, dtypes, grad_history)


def _fp8_dot_bwd(cfg, res, g):
    ql, qr, (dls, drs), (ldt, rdt), grad_history = res
    lhs_hat, rhs_hat = _materialize(ql), _materialize(qr)
    g = g.astype(jnp.float32)
    gp = cfg.grad_prec
    lhs_free, rhs_free = cfg.axes(lhs_hat.ndim, rhs_hat.ndim)
    new_history = jnp.zeros_like(grad_history)
    if gp.is_delayed:
        amax = jnp.max(jnp.abs(g))
        scale = scale_from_history(
            grad_history,
            gp.jnp_dtype,
            reduce=gp.amax_reduce,
            margin=gp.margin,
            pow2_scale=gp.pow2_scale,
            fallback_amax=amax,
        )
        g_for_lhs = g_for_rhs = quantize_operand(g, gp, (), "gradients", scale)
        new_history = update_history(grad_history, amax)
    elif _per_tensor(gp) or not gp.is_fp8:
        g_for_lhs = g_for_rhs = quantize_operand(g, gp, (), "gradients")
    else:
        g_for_lhs = quantize_operand(g, gp, rhs_free, "gradients")
        g_for_rhs = quantize_operand(g, gp, lhs_free, "gradients")

    def dot(a, b, pa, pb):
        prec = _precision(pa, pb)
        dn = cfg.dimension_numbers
        return lax.dot_general(a, b, dn, precision=prec, preferred_element_type=jnp.float32)

    _, vjp_l = jax.vjp(lambda a: dot(a, rhs_hat, cfg.lhs_prec, gp), lhs_hat)
    _, vjp_r = jax.vjp(lambda b: dot(lhs_hat, b, gp, cfg.rhs_prec), rhs_hat)
    dlhs = vjp_l(_materialize(g_for_lhs))[0].astype(ldt.dtype)
    drhs = vjp_r(_materialize(g_for_rhs))[0].astype(rdt.dtype)
    return dlhs, drhs, dls, drs, new_history


_fp8_dot.defvjp(_fp8_dot_fwd, _fp8_dot_bwd)


def _normalize_dn(dimension_numbers: Any) -> DimensionNumbers:
    (lc, rc), (lb, rb) = dimension_numbers
    return (tuple(int(a) for a in lc), tuple(int(a) for a in rc)), (
        tuple(int(a) for a in lb),
        tuple(int(a) for a in rb),
    )


def fp8_dot_general(
    lhs: jnp.ndarray,
    rhs: jnp.ndarray,
    dimension_numbers: Any,
    *,
    lhs_prec: TensorPrecision = E4M3,
    rhs_prec: TensorPrecision = E4M3,
    grad_prec: TensorPrecision = E5M2,
    lhs_scale: jnp.ndarray | None = None,
    rhs_scale: jnp.ndarray | None = None,
    grad_amax_history: jnp.ndarray | None = None,
    lhs_role: str = "activations",
    rhs_role: str = "weights",
) -> jnp.ndarray:
    """``lax.dot_general`` with quantized operands and gradients; returns float32.

    Any precision may also be "bf16" / "fp32" (operand rounded to bf16 / kept). Per-tensor
    operands use the given ``lhs_scale`` / ``rhs_scale`` (current amax if None); a ``grad_prec``
    with delayed scaling needs ``grad_amax_history``, whose cotangent is the updated history.
    ``lhs_role`` / ``rhs_role`` (``OPERAND_ROLES``) pick the default block shapes.
    """
    for name, role in (("lhs_role", lhs_role), ("rhs_role", rhs_role)):
        if role not in OPERAND_ROLES:
            raise ValueError(f"{name}={role!r} is not allowed; choose one of {list(OPERAND_ROLES)}")
    if grad_prec.is_delayed and grad_amax_history is None:
        raise ValueError("grad_prec with scaling='delayed' needs grad_amax_history")
    cfg = _Config(
        _normalize_dn(dimension_numbers),
        lhs_prec,
        rhs_prec,
        grad_prec,
        lhs_role,
        rhs_role,
        lhs_scale is not None,
        rhs_scale is not None,
    )
    one = jnp.ones((), jnp.float32)
    ls = one if lhs_scale is None else jnp.asarray(lhs_scale, jnp.float32)
    rs = one if rhs_scale is None else jnp.asarray(rhs_scale, jnp.float32)
    gh = jnp.zeros((1,), jnp.float32) if grad_amax_history is None else grad_amax_history
    return _fp8_dot(cfg, lhs, rhs, ls, rs, gh)
