"""SwiGLU feed-forward block."""

from __future__ import annotations

import flax.linen as nn
import jax

from calclip_jax.fp8 import PrecisionRecipe, RecipeDense
from calclip_jax.model.config import ModelConfig


class MLP(nn.Module):
    """down_proj(silu(gate_proj(x)) * up_proj(x)); every matmul a RecipeDense."""

    config: ModelConfig
    recipe: PrecisionRecipe

    @nn.compact
    def __call__(self, x_BTD: jax.Array) -> jax.Array:
        cfg, pol = self.config, self.recipe
        gate_BTF = RecipeDense(cfg.d_ff, pol, name="gate_proj")(x_BTD)
        up_BTF = RecipeDense(cfg.d_ff, pol, name="up_proj")(x_BTD)
        return RecipeDense(cfg.d_model, pol, name="down_proj")(jax.nn.silu(gate_BTF) * up_BTF)
