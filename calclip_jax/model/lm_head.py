"""Tied output projection: logits = x @ embedding.T at the recipe's lm_head precision."""

from __future__ import annotations

import jax

from calclip_jax.fp8 import PrecisionRecipe, recipe_einsum


def tied_lm_head(x_BTD: jax.Array, embedding_VD: jax.Array, recipe: PrecisionRecipe) -> jax.Array:
    """float32 logits [B, T, V] from the transposed embedding via `recipe_einsum(role="lm_head")`.

    FP8 weight scale groups run along D (one per vocabulary row for "channel"). The tied head is
    stateless: delayed scaling of lm_head falls back to current (per-tensor) scaling.
    """
    return recipe_einsum("btd,vd->btv", x_BTD, embedding_VD, recipe, role="lm_head")
