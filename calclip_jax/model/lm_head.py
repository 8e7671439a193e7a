"""Output projection (logits = final hidden states @ head weight) at the recipe's lm_head precision.

The Transformer applies it to all positions. `lm_head_weight` + `lm_head_dot` give the same
projection, for a non-FP8 lm_head, as a pure function of the params, for callers that apply it in
chunks (`model/chunked_logprobs.py`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from calclip_jax.fp8 import PrecisionRecipe, matmul_precisions, recipe_einsum
from calclip_jax.fp8.matmul import plain_dot_operands
from calclip_jax.model.config import ModelConfig


def tied_lm_head(x_BTD: jax.Array, embedding_VD: jax.Array, recipe: PrecisionRecipe) -> jax.Array:
    """float32 logits [B, T, V] from the transposed embedding via `recipe_einsum(role="lm_head")`.

    FP8 weight scale groups run along D (one per vocabulary row for "channel"). The tied head is
    stateless: delayed scaling of lm_head falls back to current (per-tensor) scaling.
    """
    return recipe_einsum("btd,vd->btv", x_BTD, embedding_VD, recipe, role="lm_head")


def lm_head_weight(config: ModelConfig, params: Any) -> jax.Array:
    """The head weight in `params`: the embedding [V, D] if tied, else lm_head's kernel [D, V]."""
    return params["embed"]["embedding"] if config.tie_embeddings else params["lm_head"]["kernel"]


@dataclasses.dataclass(frozen=True)
class HeadDot:
    """A non-FP8 lm_head as float32 `dot_general`s of x [..., D] and the `lm_head_weight`, the
    GEMMs of `fp8_dot_general` at this precision: operands (and, backward, the logits' cotangent)
    cast to `dtype`, float32 accumulation."""

    tied: bool
    dtype: Any  # jnp.bfloat16 or jnp.float32
    precision: lax.Precision | None

    def _d_axis(self) -> int:
        return 1 if self.tied else 0  # the weight's D axis

    def __call__(self, x: jax.Array, w: jax.Array) -> jax.Array:
        """float32 logits [..., V]."""
        dims = (((x.ndim - 1,), (self._d_axis(),)), ((), ()))
        return self._dot(x.astype(self.dtype), w.astype(self.dtype), dims)

    def _dot(self, a: jax.Array, b: jax.Array, dims: Any) -> jax.Array:
        return lax.dot_general(
            a, b, dims, precision=self.precision, preferred_element_type=jnp.float32
        )

    def vjp(self, x: jax.Array, w: jax.Array, g: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(dx, dw) of `self(x, w)` for the logits' cotangent g, both float32."""
        x_op, w_op, g_op = x.astype(self.dtype), w.astype(self.dtype), g.astype(self.dtype)
        lead = tuple(range(x.ndim - 1))
        dx = self._dot(g_op, w_op, (((g.ndim - 1,), (1 - self._d_axis(),)), ((), ())))
        if self.tied and jnp.dtype(self.dtype) != jnp.float32:  # w [V, D]
            dw = self._dot(g_op, x_op, ((lead, lead), ((), ())))
        else:
            # [D, V] = x^T g; a tied float32 weight [V, D] takes its transpose. Computed as
            # g^T x instead, XLA-CPU first copies g ([tokens, V], the largest array of the
            # step) into [V, tokens]: this form takes a SmolLM2 chunk's log-prob gradient to
            # about 0.7x the time. (Not for bfloat16: XLA-CPU's dot thunk runs no bf16 x bf16
            # -> f32 product in this form.)
            dw = self._dot(x_op, g_op, ((lead, lead), ((), ())))
            dw = dw.T if self.tied else dw
        return dx.astype(x.dtype), dw.astype(w.dtype)


def lm_head_dot(config: ModelConfig, recipe: PrecisionRecipe) -> HeadDot:
    """The lm_head of `config` under `recipe` (lm_head not FP8) as a `HeadDot`."""
    act, wgt, _ = matmul_precisions(recipe, "lm_head")
    if act.is_fp8 or wgt.is_fp8:
        raise ValueError("lm_head_dot: an FP8 lm_head is applied by the Transformer only")
    return HeadDot(config.tie_embeddings, *plain_dot_operands(act, wgt))
