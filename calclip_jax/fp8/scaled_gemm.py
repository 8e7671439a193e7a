"""Scaled GEMMs on canonical views (``gemm_view``): float8 operands, scales outside the dot.

An operand is a [B, R, K] view quantized along K (a ``QuantizedArray`` with axis -1), or a plain
bfloat16 / float32 array. ``gemm(a, b)`` computes ``bmk,bnk->bmn`` with float32 accumulation:
- tensor: one float8 dot, times the two scalar scales;
- channel: one float8 dot, times the row scales of a and of b (exact: they do not vary along K);
- block / mx: one float8 dot per K chunk (the scale groups' width along K, 128 / 32), each
  partial times its chunk's scales, added in order into one float32 accumulator by a loop
  (``lax.while_loop`` over the chunks of the operands in place, whatever their number: scratch
  of about one [B, M, N] partial, no operand copy; a ragged last chunk overlaps the one before
  it, with the overlap zeroed; a while_loop's body is lowered inline, so each dot keeps its op
  name, where identical ``fori_loop`` bodies share one function); MX may instead use
  ``jax.nn.scaled_matmul`` when lowered for ``cuda`` (``mx_cudnn``: only where cuDNN has
  block-scaled GEMMs, compute capability >= 10);
- two plain operands of one dtype: a bf16 dot (float32 accumulation) or a float32 dot at HIGHEST;
- anything else (an FP8 operand against a non-FP8 one): both dequantized, a float32 dot at
  HIGHEST (emulated; no preset does this).
Scales meet the output through ``output_scale.apply_scales`` (no overflow unless the output
overflows). 4-bit (E2M1) operands are widened to bfloat16 in a CPU lowering only (XLA-CPU
rejects 4-bit dots). Products of FP8 values are exact in float32, so every path equals the
float32 dot of the dequantized operands up to float32 rounding of the accumulation and of the
scale products. The chunks' float8 values are sliced as uint8 bits (XLA-CPU would otherwise
widen a whole operand to float16 around the slice, outside the loop).
"""

from __future__ import annotations

import functools
import math

import jax.numpy as jnp
from jax import lax

from calclip_jax.fp8.mx_cudnn import mx_gemm
from calclip_jax.fp8.output_scale import SplitScale, apply_scales, split_scale
from calclip_jax.fp8.quantize import MX_BLOCK, QuantizedArray, dequantize, quantize
from calclip_jax.fp8.recipe import TensorPrecision

Operand = QuantizedArray | jnp.ndarray
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
    """float32 ``bmk,bnk->bmn``. XLA-CPU cannot widen 4-bit (E2M1) operands itself, so a CPU
    lowering widens them to bfloat16 first (exact); other platforms get the 4-bit dot."""
    dot = functools.partial(_plain_dot, precision=precision)
    if 4 not in (jnp.finfo(op.dtype).bits for op in (a, b)):
        return dot(a, b)
    widened = lambda a, b: dot(a.astype(jnp.bfloat16), b.astype(jnp.bfloat16))
    return lax.platform_dependent(a, b, cpu=widened, default=dot)


def _plain_dot(a: jnp.ndarray, b: jnp.ndarray, precision: lax.Precision | None) -> jnp.ndarray:
    return lax.dot_general(a, b, _BMK_BNK, precision=precision, preferred_element_type=jnp.float32)


def _chunk_width(op: QuantizedArray) -> int:
    """Width along K of the operand's scale groups (its own K for tensor and channel)."""
    if op.granularity == "mx":
        return MX_BLOCK
    return op.block_shape[1] if op.granularity == "block" else op.values.shape[-1]


def _chunk_scales(op: QuantizedArray) -> jnp.ndarray | SplitScale:
    """Block / MX scales with the K groups first ([G, B, R / rows per group]: a chunk's scales
    are one contiguous slice); tensor and channel scales split once (constant along K)."""
    if op.granularity in ("tensor", "channel"):
        return split_scale(op.scale)
    return jnp.moveaxis(op.scale, 2, 0)


def _chunk_scale(op: QuantizedArray, scales, index, per_chunk: int) -> SplitScale:
    """The split scale of K chunk ``index`` (``per_chunk`` chunks per scale group) as a [B, R, 1]
    factor (a scalar for tensor), from ``_chunk_scales``."""
    if op.granularity in ("tensor", "channel"):
        return scales  # () or [B, R, 1]
    rows = op.values.shape[1]
    scale = lax.dynamic_index_in_dim(scales, index // per_chunk, axis=0, keepdims=False)
    if op.granularity == "block":
        scale = jnp.repeat(scale, op.block_shape[0], axis=1)[:, :rows]
    return split_scale(scale[:, :, None])


def _transposed(split: SplitScale) -> SplitScale:
    """A [B, N, 1] factor of operand b as [B, 1, N] (scalars unchanged)."""
    return tuple(p if p.ndim == 0 else jnp.swapaxes(p, 1, 2) for p in split)


def _as_bits(values: jnp.ndarray) -> jnp.ndarray:
    """float8 values as uint8 (the same bits); 4-bit ones as they are (XLA-CPU rejects uint4
    bitcasts of them)."""
    bits = jnp.finfo(values.dtype).bits == 8
    return lax.bitcast_convert_type(values, jnp.uint8) if bits else values


def _from_bits(chunk: jnp.ndarray, like: jnp.ndarray) -> jnp.ndarray:
    """Inverse of ``_as_bits`` on a chunk of ``like``."""
    same = chunk.dtype == like.dtype
    return chunk if same else lax.bitcast_convert_type(chunk, like.dtype)


def _chunked_gemm(a: QuantizedArray, b: QuantizedArray) -> jnp.ndarray:
    """Σ over K chunks of float8 dot(a_chunk, b_chunk) x the chunk's scales, in float32, one
    chunk after another into one accumulator (see the module docstring)."""
    widths = [_chunk_width(op) for op in (a, b) if op.granularity in ("block", "mx")]
    chunk = math.gcd(*widths)
    k = a.values.shape[-1]
    n_chunks = math.ceil(k / chunk)
    splits = [_chunk_scales(op) for op in (a, b)]
    per_chunk = [max(_chunk_width(op) // chunk, 1) for op in (a, b)]

    def partial(a_c, b_c, index):
        sa = _chunk_scale(a, splits[0], index, per_chunk[0])
        sb = _chunk_scale(b, splits[1], index, per_chunk[1])
        return apply_scales(_dot(a_c, b_c), sa, _transposed(sb))

    if n_chunks == 1:
        return partial(a.values, b.values, 0)

    # Sliced as raw bits: XLA-CPU would widen float8 operands to float16 around a slice and
    # hoist that copy of the whole operand out of the loop.
    a_bits, b_bits = _as_bits(a.values), _as_bits(b.values)

    def body(index, acc):
        start = jnp.minimum(index * chunk, k - chunk)  # the ragged last chunk overlaps
        a_c = lax.dynamic_slice_in_dim(a_bits, start, chunk, axis=2)
        b_c = lax.dynamic_slice_in_dim(b_bits, start, chunk, axis=2)
        if k % chunk:  # zero (+0.0 bits) the overlap with the chunk before: a's side suffices
            fresh = start + jnp.arange(chunk) >= index * chunk
            a_c = jnp.where(fresh, a_c, jnp.zeros((), a_c.dtype))
        return acc + partial(_from_bits(a_c, a.values), _from_bits(b_c, b.values), index)

    acc = jnp.zeros((a.values.shape[0], a.values.shape[1], b.values.shape[1]), jnp.float32)
    step = lambda carry: (carry[0] + 1, body(*carry))  # (chunk index, accumulator)
    return lax.while_loop(lambda carry: carry[0] < n_chunks, step, (jnp.int32(0), acc))[1]


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
    if grans == {"mx"}:
        return mx_gemm(a, b, _chunked_gemm)
    if grans <= {"tensor", "channel"}:
        sa, sb = split_scale(a.scale), _transposed(split_scale(b.scale))
        return apply_scales(_dot(a.values, b.values), sa, sb)
    return _chunked_gemm(a, b)
