"""Quantized ``dot_general`` for training (``jax.custom_vjp``): real float8 / bf16 GEMMs.

Every GEMM of forward and backward runs on the canonical views of ``gemm_view`` and quantizes its
two operands with scale groups along *its own* contraction axis, so the scales factor out of the
dot (``scaled_gemm.gemm``: float8 operands, float32 accumulation, scales on the output):
- forward ``y = x . w``: x and w grouped along K (activations per token / 1x128 / 1x32, weights
  per output column / 128x128 / 32 along K);
- ``dx = g . w^T``: g grouped along N, w along N;
- ``dw = x^T . g``: x grouped along M (the tokens), g along M.
Groups that are the same on the transposed view (per-tensor, square 128x128 weight blocks) are
reused; the others are quantized a second time from the high-precision operand during the
forward (as Transformer Engine and DeepSeek-V3 do: 1x128 activation tiles become 128x1 tiles for
dw). The custom VJP saves only these quantized backward operands (FP8 values and float32 scales;
bfloat16 copies for a bf16 precision), never dequantized float32 copies.

A "bf16" precision makes the GEMMs bf16 x bf16 with float32 accumulation, the incoming gradient
included (mixed precision: float32 master weights, every dot on bf16 operands). A delayed-scaling
gradient precision takes its scale from ``grad_amax_history``; the updated history is returned as
that argument's "gradient" (overwrite-with-gradient, see ``delayed.merge_fp8_meta``).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp

from calclip_jax.fp8.delayed import scale_from_history, update_history
from calclip_jax.fp8.gemm_view import (
    DimensionNumbers,
    OperandView,
    normalize_dimension_numbers,
    operand_views,
    output_shape,
)
from calclip_jax.fp8.quantize import QuantizedArray, dequantize
from calclip_jax.fp8.recipe import TensorPrecision
from calclip_jax.fp8.scaled_gemm import (
    Operand,
    gemm,
    groups_survive_transpose,
    quantize_view,
    transpose_operand,
)
from calclip_jax.fp8.vocabulary import OPERAND_ROLES

E4M3 = TensorPrecision("e4m3", "tensor")
E5M2 = TensorPrecision("e5m2", "tensor")


@dataclasses.dataclass(frozen=True)
class _Config:
    dimension_numbers: DimensionNumbers
    lhs_shape: tuple[int, ...]
    rhs_shape: tuple[int, ...]
    lhs_prec: TensorPrecision
    rhs_prec: TensorPrecision
    grad_prec: TensorPrecision
    lhs_role: str
    rhs_role: str
    has_lhs_scale: bool
    has_rhs_scale: bool

    def views(self) -> tuple[OperandView, OperandView]:
        return operand_views(self.lhs_shape, self.rhs_shape, self.dimension_numbers)


def _operand_pair(
    view: jnp.ndarray, prec: TensorPrecision, role: str, scale: jnp.ndarray | None
) -> tuple[Operand, Operand]:
    """(forward operand [B, R, K], backward operand [B, K, R]) of one input view."""
    forward = quantize_view(view, prec, role, scale)
    if groups_survive_transpose(prec, role):
        return forward, transpose_operand(forward)
    return forward, quantize_view(jnp.swapaxes(view, 1, 2), prec, role, scale)


def _scales(cfg: _Config, lhs_scale, rhs_scale):
    return (
        lhs_scale if cfg.has_lhs_scale else None,
        rhs_scale if cfg.has_rhs_scale else None,
    )


def _forward(cfg: _Config, lhs, rhs, lhs_scale, rhs_scale, keep_backward: bool):
    lv, rv = cfg.views()
    ls, rs = _scales(cfg, lhs_scale, rhs_scale)
    if keep_backward:
        ql, ql_t = _operand_pair(lv.to_view(lhs), cfg.lhs_prec, cfg.lhs_role, ls)
        qr, qr_t = _operand_pair(rv.to_view(rhs), cfg.rhs_prec, cfg.rhs_role, rs)
    else:
        ql = quantize_view(lv.to_view(lhs), cfg.lhs_prec, cfg.lhs_role, ls)
        qr = quantize_view(rv.to_view(rhs), cfg.rhs_prec, cfg.rhs_role, rs)
        ql_t = qr_t = None
    out = gemm(ql, qr).reshape(output_shape(lv, rv))
    return out, (ql_t, qr_t)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _quantized_dot(cfg: _Config, lhs, rhs, lhs_scale, rhs_scale, grad_history):
    return _forward(cfg, lhs, rhs, lhs_scale, rhs_scale, keep_backward=False)[0]


def _quantized_dot_fwd(cfg, lhs, rhs, lhs_scale, rhs_scale, grad_history):
    out, (ql_t, qr_t) = _forward(cfg, lhs, rhs, lhs_scale, rhs_scale, keep_backward=True)
    zeros = (jnp.zeros_like(lhs_scale), jnp.zeros_like(rhs_scale))
    like = (jnp.zeros((0,) * lhs.ndim, lhs.dtype), jnp.zeros((0,) * rhs.ndim, rhs.dtype))
    return out, (ql_t, qr_t, zeros, like, grad_history)


def _gradient_operands(cfg: _Config, g_view: jnp.ndarray, grad_history: jnp.ndarray):
    """(g for dlhs grouped along N [B, M, N], g^T for drhs grouped along M [B, N, M], history)."""
    gp = cfg.grad_prec
    new_history = jnp.zeros_like(grad_history)
    scale = None
    if gp.is_delayed:
        amax = jnp.max(jnp.abs(g_view))
        scale = scale_from_history(
            grad_history,
            gp.jnp_dtype,
            reduce=gp.amax_reduce,
            margin=gp.margin,
            pow2_scale=gp.pow2_scale,
            fallback_amax=amax,
        )
        new_history = update_history(grad_history, amax)
    g_rows, g_cols = _operand_pair(g_view, gp, "gradients", scale)
    return g_rows, g_cols, new_history


def _quantized_dot_bwd(cfg, res, g):
    ql_t, qr_t, (dls, drs), (lhs_like, rhs_like), grad_history = res
    lv, rv = cfg.views()
    b, m, _ = lv.sizes()
    g_view = g.astype(jnp.float32).reshape(b, m, rv.sizes()[1])
    g_rows, g_cols, new_history = _gradient_operands(cfg, g_view, grad_history)
    dlhs = lv.from_view(gemm(g_rows, qr_t)).astype(lhs_like.dtype)
    drhs = rv.from_view(gemm(g_cols, ql_t)).astype(rhs_like.dtype)
    return dlhs, drhs, dls, drs, new_history


_quantized_dot.defvjp(_quantized_dot_fwd, _quantized_dot_bwd)


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

    Any precision may also be "bf16" (bf16 operands, float32 accumulation) or "fp32". Per-tensor
    operands use the given ``lhs_scale`` / ``rhs_scale`` (current amax if None); a ``grad_prec``
    with delayed scaling needs ``grad_amax_history``, whose cotangent is the updated history.
    ``lhs_role`` / ``rhs_role`` (``OPERAND_ROLES``) pick the default block shapes.
    """
    for name, role in (("lhs_role", lhs_role), ("rhs_role", rhs_role)):
        if role not in OPERAND_ROLES:
            raise ValueError(f"{name}={role!r} is not allowed; choose one of {list(OPERAND_ROLES)}")
    if grad_prec.is_delayed and grad_amax_history is None:
        raise ValueError("grad_prec with scaling='delayed' needs grad_amax_history")
    dn = normalize_dimension_numbers(dimension_numbers)
    operand_views(lhs.shape, rhs.shape, dn)  # checks the dimension numbers
    cfg = _Config(
        dn,
        tuple(lhs.shape),
        tuple(rhs.shape),
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
    return _quantized_dot(cfg, lhs, rhs, ls, rs, gh)


def fake_quantize_operand(
    x: jnp.ndarray, prec: TensorPrecision, contract_axes: tuple[int, ...], role: str
) -> jnp.ndarray:
    """``x`` as a GEMM contracting ``contract_axes`` sees it under ``prec``, dequantized to
    float32 (scale groups along the contraction axes; ``role`` picks the block shape)."""
    view = OperandView(tuple(x.shape), (), tuple(a % x.ndim for a in contract_axes))
    op = quantize_view(view.to_view(x), prec, role)
    dense = dequantize(op) if isinstance(op, QuantizedArray) else op
    return view.from_view(dense.astype(jnp.float32))
