"""Output projection (logits = final hidden states @ head weight) at the recipe's lm_head precision.

The Transformer applies it to all positions; `lm_head_weight` + `lm_head_projection` give the same
projection as a pure function of the params, for callers that apply it in chunks
(`model/chunked_logprobs.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from calclip_jax.fp8 import PrecisionRecipe, matmul_precisions, recipe_dot_general, recipe_einsum
from calclip_jax.model.config import ModelConfig

Projection = Callable[[jax.Array, jax.Array], jax.Array]


def tied_lm_head(x_BTD: jax.Array, embedding_VD: jax.Array, recipe: PrecisionRecipe) -> jax.Array:
    """float32 logits [B, T, V] from the transposed embedding via `recipe_einsum(role="lm_head")`.

    FP8 weight scale groups run along D (one per vocabulary row for "channel"). The tied head is
    stateless: delayed scaling of lm_head falls back to current (per-tensor) scaling.
    """
    return recipe_einsum("btd,vd->btv", x_BTD, embedding_VD, recipe, role="lm_head")


def untied_lm_head(x_BTD: jax.Array, kernel_DV: jax.Array, recipe: PrecisionRecipe) -> jax.Array:
    """float32 logits [B, T, V]: `RecipeDense(role="lm_head")` as a pure function, for a
    non-FP8 lm_head (an FP8 one may keep delayed-scaling state: use the module)."""
    act, wgt, grad = matmul_precisions(recipe, "lm_head")
    if act.is_fp8 or wgt.is_fp8:
        raise ValueError("untied_lm_head: an FP8 lm_head is applied by the Transformer module")
    dn = (((x_BTD.ndim - 1,), (0,)), ((), ()))
    return recipe_dot_general(x_BTD, kernel_DV, dn, act, wgt, grad)


def lm_head_weight(config: ModelConfig, params: Any) -> jax.Array:
    """The head weight in `params`: the embedding [V, D] if tied, else lm_head's kernel [D, V]."""
    return params["embed"]["embedding"] if config.tie_embeddings else params["lm_head"]["kernel"]


def lm_head_projection(config: ModelConfig, recipe: PrecisionRecipe) -> Projection:
    """(hidden [B, T, D], `lm_head_weight`) -> float32 logits [B, T, V], as the Transformer
    computes them."""
    head = tied_lm_head if config.tie_embeddings else untied_lm_head
    return lambda x_BTD, w: head(x_BTD, w, recipe)
