"""Pure-function entry points: positions from masks, and a plain logits forward."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model.config import ModelConfig
from calclip_jax.model.transformer import Transformer


def positions_from_mask(attn_mask_BT: jax.Array) -> jax.Array:
    """Positions 0, 1, ... counted over real tokens (left padding gets 0)."""
    return jnp.maximum(jnp.cumsum(attn_mask_BT.astype(jnp.int32), axis=1) - 1, 0)


def fp32_recipe() -> PrecisionRecipe:
    """The float32 reference recipe (KV cache in float32 too)."""
    pol = PrecisionRecipe.preset("fp32")
    return pol


def forward_logits(
    model_config: ModelConfig,
    params: Any,
    tokens: jax.Array,
    recipe: PrecisionRecipe | None = None,
    attn_mask: jax.Array | None = None,
    fp8_meta: Any = None,
) -> jax.Array:
    """float32 logits [B, T, V] for tokens [B, T]; recipe defaults to the fp32 preset.

    `attn_mask` (1 = real token) supports left padding; positions are derived from it.
    """
    recipe = fp32_recipe() if recipe is None else recipe
    attn_mask = jnp.ones(tokens.shape, jnp.int32) if attn_mask is None else attn_mask
    variables = {"params": params}
    if fp8_meta is not None:
        variables["fp8_meta"] = fp8_meta
    logits, _ = Transformer(model_config, recipe).apply(
        variables, tokens, positions_from_mask(attn_mask), attn_mask
    )
    return logits
