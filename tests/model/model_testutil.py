"""Shared tiny-model helpers for model tests."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model import ModelConfig, Transformer

TINY = ModelConfig.preset("tiny")


def init_params(config: ModelConfig, seed: int = 0, recipe: str = "fp32") -> dict:
    """Random float32 params of `config` (Flax default initializers)."""
    model = Transformer(config, PrecisionRecipe.preset(recipe))
    tokens = jnp.zeros((1, 4), jnp.int32)
    params = jax.jit(model.init)(
        jax.random.key(seed), tokens, jnp.zeros_like(tokens), jnp.ones_like(tokens)
    )
    return params["params"]


def variant(config: ModelConfig, **changes) -> ModelConfig:
    return dataclasses.replace(config, **changes)
