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
    """A non-FP8 lm_head as one float32 `dot_general` of x [..., D] and the `lm_head_weight`, both
    operands cast to `dtype` (the ops of `recipe_dot_general`)."""

    tied: bool
    dtype: Any  # jnp.bfloat16 or jnp.float32
    precision: lax.Precision | None

    def _dot(self, x: jax.Array, w: jax.Array) -> jax.Array:
        dims = (((x.ndim - 1,), (1 if self.tied else 0,)), ((), ()))
        return lax.dot_general(
            x, w, dims, precision=self.precision, preferred_element_type=jnp.float32
        )

    def __call__(self, x: jax.Array, w: jax.Array) -> jax.Array:
        """float32 logits [..., V]."""
        return self._dot(x.astype(self.dtype), w.astype(self.dtype))

    def vjp(self, x: jax.Array, w: jax.Array, g: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(dx, dw) of `self(x, w)` for the logits' cotangent g: dx as autodiff gives it, dw
        float32 *before* autodiff's rounding to `dtype` (so partial sums can add in float32)."""
        w_op = w.astype(self.dtype)
        dx = jax.vjp(lambda x_: self._dot(x_.astype(self.dtype), w_op), x)[1](g)[0]
        dw = jax.vjp(lambda w_: self._dot(x.astype(self.dtype), w_), w)[1](g)[0]
        return dx, dw


def lm_head_dot(config: ModelConfig, recipe: PrecisionRecipe) -> HeadDot:
    """The lm_head of `config` under `recipe` (lm_head not FP8) as a `HeadDot`."""
    act, wgt, _ = matmul_precisions(recipe, "lm_head")
    if act.is_fp8 or wgt.is_fp8:
        raise ValueError("lm_head_dot: an FP8 lm_head is applied by the Transformer only")
    return HeadDot(config.tie_embeddings, *plain_dot_operands(act, wgt))
