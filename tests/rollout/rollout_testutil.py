"""Tiny model helpers for rollout tests."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model import ModelConfig, Transformer, forward_logits

TINY = ModelConfig.preset("tiny")
FWD = jax.jit(forward_logits, static_argnums=(0, 3))  # (config, params, tokens, recipe, mask)


def init_params(config: ModelConfig = TINY, seed: int = 0) -> dict:
    """Random float32 params (Flax default initializers)."""
    model = Transformer(config, PrecisionRecipe.preset("fp32"))
    tokens = jnp.zeros((1, 4), jnp.int32)
    return jax.jit(model.init)(jax.random.key(seed), tokens, tokens, jnp.ones_like(tokens))[
        "params"
    ]


def prompts(batch: int = 2, length: int = 5, seed: int = 0) -> tuple[jax.Array, jax.Array]:
    """Left-padded random prompts (row i has i pad tokens) and their masks; pad id 0."""
    tokens = jax.random.randint(jax.random.key(seed), (batch, length), 2, TINY.vocab_size)
    mask = (jnp.arange(length)[None, :] >= jnp.arange(batch)[:, None]).astype(jnp.int32)
    return tokens * mask, mask
