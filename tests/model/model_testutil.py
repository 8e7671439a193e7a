"""Shared tiny-model helpers for model tests."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model import ModelConfig, Transformer, init_cache, positions_from_mask

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


def cached_logits(
    config: ModelConfig,
    recipe: PrecisionRecipe,
    params: dict,
    tokens_BT: jax.Array,
    mask_BT: jax.Array,
    prefill: int,
) -> jax.Array:
    """Prefill `prefill` tokens, then decode the rest one at a time; logits of every position."""
    (b, t), p = tokens_BT.shape, prefill
    model = Transformer(config, recipe)
    pos_BT = positions_from_mask(mask_BT)
    cache = init_cache(config, recipe, b, t)
    run = functools.partial(model.apply, {"params": params})
    pre_BPV, cache = run(tokens_BT[:, :p], pos_BT[:, :p], mask_BT[:, :p], cache, 0)

    def step(cache, i):
        col = lambda x: jax.lax.dynamic_slice_in_dim(x, i, 1, axis=1)
        logits, cache = run(col(tokens_BT), col(pos_BT), col(mask_BT), cache, i)
        return cache, logits[:, 0]

    _, dec_NBV = jax.lax.scan(step, cache, jnp.arange(p, t))
    return jnp.concatenate([pre_BPV, jnp.swapaxes(dec_NBV, 0, 1)], axis=1)
