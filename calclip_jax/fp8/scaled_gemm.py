"""Scaled GEMMs on canonical views (``gemm_view``): float8 operands, scales outside the dot.

An operand is a [B, R, K] view quantized along K (a ``QuantizedArray`` with axis -1), or a plain
bfloat16 / float32 array. ``gemm(a, b)`` computes ``bmk,bnk->bmn`` with float32 accumulation:
- tensor: one float8 dot, times the two scalar scales;
- channel: one float8 dot, times the row scales of a and of b (exact: they do not vary along K);
- block / mx: one float8 dot per K chunk (the scale groups' width along K, 128 / 32), each
  partial times its chunk's scales, accumulated in float32 (inline for a few chunks, else by a
  ``lax.scan``: no [K / chunk, M, N] intermediate either way); MX uses ``jax.nn.scaled_matmul``
  (cuDNN block-scaled GEMM, E8M0 scales) where the local device supports it (compute capability
  >= 10), the chunked dots elsewhere;
- two plain operands of one dtype: a bf16 dot (float32 accumulation) or a float32 dot at HIGHEST;
- anything else (an FP8 operand against a non-FP8 one): both dequantized, a float32 dot at
  HIGHEST (emulated; no preset does this).
Products of FP8 values are exact in float32, so every path equals the float32 dot of the
dequantized operands up to float32 rounding of the accumulation and of the scale products.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

from calclip_jax.fp8.quantize import MX_BLOCK, QuantizedArray, dequantize, quantize
from calclip_jax.fp8.recipe import TensorPrecision

Operand = QuantizedArray | jnp.ndarray
UNROLLED_CHUNKS = 8  # up to this many K chunks: inline dots; more: a lax.scan over the chunks
_BMK_BNK = (((2,), (2,)), ((0,), (0,)))


def quantize_view(
    view: jnp.ndarray, prec: TensorPrecision, role: str, scale: jnp.ndarray | None = None
) -> Operand:
    """A [B, R, K] view as a GEMM operand of precision ``prec`` (groups along K); ``role`` picks
    the default block shape; ``scale`` replaces a per-tensor scale (delayed scaling)."""
    if not prec.is_fp8:
        return view.astype(prec.jnp_dtype)
    opts = {"pow2_scale": prec.pow2_scale, "margin": prec.margin, "scale": scale}
    if prec.granularity == "block":
        opts["block_shape"] = prec.block_shape_for(role)
    return quantize(view, prec.jnp_dtype, prec.granularity, axis=-1, **opts)


def groups_survive_transpose(prec: TensorPrecision, role: str) -> bool:
    """True when the operand's scale groups are the same on its transposed view (per-tensor, or
    square blocks), so the quantized values can be reused instead of quantized again."""
    if not prec.is_fp8 or prec.granularity == "tensor":
        return True
    if prec.granularity == "block":
        rows, cols = prec.block_shape_for(role)
        return rows == cols
    return False


def transpose_operand(op: Operand) -> Operand:
    """The transposed view [B, K, R] of an operand whose groups survive the transpose."""
    if not isinstance(op, QuantizedArray):
        return jnp.swapaxes(op, 1, 2)
    scale = op.scale if op.scale.ndim == 0 else jnp.swapaxes(op.scale, 1, 2)
    rows, cols = op.block_shape
    return QuantizedArray(jnp.swapaxes(op.values, 1, 2), scale, op.granularity, -1, (cols, rows))


def _dot(a: jnp.ndarray, b: jnp.ndarray, precision: lax.Precision | None = None) -> jnp.ndarray:
    return lax.dot_general(a, b, _BMK_BNK, precision=precision, preferred_element_type=jnp.float32)


def _chunk_width(op: QuantizedArray) -> int:
    return MX_BLOCK if op.granularity == "mx" else op.block_shape[1]


def _row_scales(op: QuantizedArray, chunk: int, n_chunks: int) -> jnp.ndarray:
    """Scale of every (row, K chunk) pair: [B, R, n_chunks], for groups along K of ``chunk`` or a
    multiple of it."""
    _, r, _ = op.values.shape
    if op.granularity == "tensor":
        return jnp.broadcast_to(op.scale, (op.values.shape[0], r, n_chunks))
    scale = op.scale
    if op.granularity == "block":
        scale = jnp.repeat(scale, op.block_shape[0], axis=1)[:, :r]
    if op.granularity == "channel":
        return jnp.broadcast_to(scale, (*scale.shape[:2], n_chunks))
    per_group = _chunk_width(op) // chunk
    return jnp.repeat(scale, per_group, axis=2)[:, :, :n_chunks]


def _chunked_gemm(a: QuantizedArray, b: QuantizedArray) -> jnp.ndarray:
    """Σ over K chunks of float8 dot(a_chunk, b_chunk) x chunk scales, in float32."""
    widths = [_chunk_width(op) for op in (a, b) if op.granularity in ("block", "mx")]
    chunk = math.gcd(*widths) if len(widths) > 1 else widths[0]
    k = a.values.shape[-1]
    n_chunks = math.ceil(k / chunk)
    sa, sb = _row_scales(a, chunk, n_chunks), _row_scales(b, chunk, n_chunks)

    def partial(a_c, b_c, sa_c, sb_c):  # one chunk: [B, M, c] x [B, N, c], scales [B, M], [B, N]
        return _dot(a_c, b_c) * sa_c[:, :, None] * sb_c[:, None, :]

    if n_chunks <= UNROLLED_CHUNKS:  # a few dots inline (no loop; each keeps its op name)
        out = None
        for i in range(n_chunks):
            cut = slice(i * chunk, min(k, (i + 1) * chunk))
            part = partial(a.values[..., cut], b.values[..., cut], sa[..., i], sb[..., i])
            out = part if out is None else out + part
        return out

    def chunks(values: jnp.ndarray) -> jnp.ndarray:  # [B, R, K] -> [n_chunks, B, R, chunk]
        padded = jnp.pad(values, ((0, 0), (0, 0), (0, n_chunks * chunk - k)))
        return jnp.moveaxis(padded.reshape(*values.shape[:2], n_chunks, chunk), 2, 0)

    def step(acc, xs):
        return acc + partial(*xs), None

    acc = jnp.zeros((a.values.shape[0], a.values.shape[1], b.values.shape[1]), jnp.float32)
    xs = (chunks(a.values), chunks(b.values), jnp.moveaxis(sa, 2, 0), jnp.moveaxis(sb, 2, 0))
    return lax.scan(step, acc, xs)[0]


def mx_gemm_supported() -> bool:
    """True when the local device runs ``jax.nn.scaled_matmul`` natively (cuDNN block-scaled
    GEMM: NVIDIA compute capability >= 10)."""
    device = jax.devices()[0]
    capability = getattr(device, "compute_capability", None)
    return device.platform == "gpu" and capability is not None and float(capability) >= 10.0


def _mx_gemm(a: QuantizedArray, b: QuantizedArray) -> jnp.ndarray:
    k = a.values.shape[-1]
    pad = (0, 0), (0, 0), (0, -k % MX_BLOCK)
    values = [jnp.pad(op.values, pad) for op in (a, b)]
    scales = [op.scale.astype(jnp.float8_e8m0fnu) for op in (a, b)]
    return jax.nn.scaled_matmul(*values, *scales, preferred_element_type=jnp.float32)


def gemm(a: Operand, b: Operand) -> jnp.ndarray:
    """float32 ``bmk,bnk->bmn`` of two GEMM operands (see the module docstring)."""
    quantized = isinstance(a, QuantizedArray), isinstance(b, QuantizedArray)
    if quantized == (False, False) and a.dtype == b.dtype:
        return _dot(a, b, lax.Precision.HIGHEST if a.dtype == jnp.float32 else None)
    if not all(quantized):
        as_f32 = lambda op: dequantize(op) if isinstance(op, QuantizedArray) else op
        return _dot(
            as_f32(a).astype(jnp.float32), as_f32(b).astype(jnp.float32), lax.Precision.HIGHEST
        )
    grans = {a.granularity, b.granularity}
    if grans == {"mx"} and mx_gemm_supported():
        return _mx_gemm(a, b)
    if grans <= {"tensor", "channel"}:
        return _dot(a.values, b.values) * _outer_scales(a, b)
    return _chunked_gemm(a, b)


def _outer_scales(a: QuantizedArray, b: QuantizedArray) -> jnp.ndarray:
    """Per-tensor or per-row scales of a and b as a factor on the [B, M, N] output."""
    sb = b.scale if b.scale.ndim == 0 else jnp.swapaxes(b.scale, 1, 2)  # [B, 1, N]
    return a.scale * sb  # a.scale: () or [B, M, 1]
