"""Full-sequence (no-cache) attention through `jax.nn.dot_product_attention`: the trainer's path
for every precision recipe.

Operands are bfloat16 (every bf16 and FP8 recipe) or float32 (the fp32 recipe, the
float64-referenced baseline: its dots run at HIGHEST precision, so no TF32 on a GPU); scores,
softmax and accumulation are float32. On a CUDA backend bfloat16 runs cuDNN's flash attention;
float32, other backends, and shapes cuDNN does not take run XLA's implementation.
`implementation=None` would always pick XLA (jax 0.10-0.12), so the choice is made here, at
trace time, from the default backend.

XLA's implementation materializes the [B, N, T, S] float32 scores; differentiated as is, it
would save two such float32 arrays and the bfloat16 probabilities per layer for the backward
(batch 4 x 2048, 32 heads: 5 GiB a layer). `masked_attention` is rematerialized instead: the
forward saves only its operands and the backward recomputes the scores (cuDNN's kernel saves its
own softmax statistics).

cuDNN's flash kernel takes masks as causal + per-row prefix lengths (right padding) cheaply; an
arbitrary boolean mask becomes a [B, 1, T, S] bias (and a bias gradient). Left-padded rows have
no valid-key prefix, so on cuDNN each row's run of valid tokens is rolled to the front, attended
with `is_causal` and its length, and rolled back. That is exact for real query rows whenever every
row's valid tokens form one contiguous run (left and right padding); a runtime check routes any
other mask to the masked XLA implementation. Query rows of padding get zeros there (they attend
to nothing), where the masked form gives them an arbitrary finite value: padding logits are never
read.
"""

from __future__ import annotations

import contextlib
from typing import Literal

import jax
import jax.numpy as jnp
from jax.extend.backend import get_backend

Implementation = Literal["cudnn", "xla"]

CUDNN_MAX_HEAD_DIM = 128  # 256 on Hopper and later; cuDNN's own check decides there
CUDNN_DTYPES = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))  # cuDNN takes no float32


def default_implementation(head_dim: int, dtype: jnp.dtype = jnp.bfloat16) -> Implementation:
    """'cudnn' when the default backend is CUDA and head_dim and dtype suit its flash kernel,
    else 'xla'."""
    backend = get_backend()
    on_cuda = backend.platform == "gpu" and "cuda" in backend.platform_version.lower()
    fits = head_dim % 8 == 0 and head_dim <= CUDNN_MAX_HEAD_DIM
    return "cudnn" if on_cuda and fits and jnp.dtype(dtype) in CUDNN_DTYPES else "xla"


def full_sequence_attention(
    q_BTNH: jax.Array,
    k_BTKH: jax.Array,
    v_BTKH: jax.Array,
    mask_BTS: jax.Array,
    dtype: jnp.dtype,
    implementation: Implementation | None = None,
) -> jax.Array:
    """GQA attention on `dtype` (bfloat16 or float32) operands, float32 accumulation; float32 out.

    `mask_BTS` is `transformer.attention_mask` without a cache: causal by slot and restricted
    to valid keys, so its last query row is the key mask. The output is rounded to `dtype`
    (the API returns the operand dtype) and then widened to float32.
    """
    q, k, v = (x.astype(dtype) for x in (q_BTNH, k_BTKH, v_BTKH))
    if (implementation or default_implementation(q.shape[-1], dtype)) == "cudnn":
        key_mask_BS = mask_BTS[:, -1, :]
        out = jax.lax.cond(
            is_one_run_per_row(key_mask_BS),
            lambda: run_attention(q, k, v, key_mask_BS, "cudnn"),
            lambda: masked_attention(q, k, v, mask_BTS),
        )
    else:
        out = masked_attention(q, k, v, mask_BTS)
    return out.astype(jnp.float32)


@jax.checkpoint
def masked_attention(q: jax.Array, k: jax.Array, v: jax.Array, mask_BTS: jax.Array) -> jax.Array:
    """XLA implementation with the boolean mask as given, rematerialized (saves q, k, v only);
    float32 operands at HIGHEST precision."""
    exact = jnp.dtype(q.dtype) == jnp.float32
    with jax.default_matmul_precision("highest") if exact else contextlib.nullcontext():
        return jax.nn.dot_product_attention(q, k, v, mask=mask_BTS[:, None], implementation="xla")


def run_attention(
    q: jax.Array, k: jax.Array, v: jax.Array, key_mask_BS: jax.Array, implementation: str
) -> jax.Array:
    """Causal attention within each row's single run of valid tokens, moved to the front."""
    start_B = jnp.argmax(key_mask_BS, axis=1).astype(jnp.int32)
    length_B = jnp.sum(key_mask_BS, axis=1, dtype=jnp.int32)
    out = jax.nn.dot_product_attention(
        roll_rows(q, start_B),
        roll_rows(k, start_B),
        roll_rows(v, start_B),
        is_causal=True,
        query_seq_lengths=length_B,
        key_value_seq_lengths=length_B,
        implementation=implementation,
    )
    return roll_rows(out, -start_B)


def is_one_run_per_row(key_mask_BS: jax.Array) -> jax.Array:
    """Scalar bool: every row's True entries are contiguous (or absent)."""
    s = key_mask_BS.shape[1]
    start_B1 = jnp.argmax(key_mask_BS, axis=1)[:, None]
    end_B1 = start_B1 + jnp.sum(key_mask_BS, axis=1, keepdims=True)
    slot_1S = jnp.arange(s)[None]
    return jnp.all(key_mask_BS == ((slot_1S >= start_B1) & (slot_1S < end_B1)))


def roll_rows(x_BT: jax.Array, shift_B: jax.Array) -> jax.Array:
    """Row b rotated left by shift_B[b] along axis 1: out[b, i] = x[b, (i + shift) mod T]."""
    t = x_BT.shape[1]
    index_BT = (jnp.arange(t)[None] + shift_B[:, None]) % t
    index = index_BT.reshape(index_BT.shape + (1,) * (x_BT.ndim - 2))
    return jnp.take_along_axis(x_BT, index, axis=1)
