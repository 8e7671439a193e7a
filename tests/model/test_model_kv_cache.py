"""Cached prefill + one-token decode equals full recomputation (bf16, FP8, FP8 KV cache)."""

from __future__ import annotations

import dataclasses
import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from model_testutil import TINY, cached_logits, init_params

from calclip_jax.fp8 import PrecisionRecipe, TensorPrecision
from calclip_jax.model import forward_logits, init_cache

B, T, P = 2, 10, 5


def _recipe(preset: str, kv: str | None) -> PrecisionRecipe:
    pol = PrecisionRecipe.preset(preset)
    return pol if kv is None else dataclasses.replace(pol, kv_cache=TensorPrecision(kv))


@functools.partial(jax.jit, static_argnums=(0,))
def _cached_logits(recipe, params, tokens_BT, mask_BT):
    return cached_logits(TINY, recipe, params, tokens_BT, mask_BT, P)


@pytest.fixture(scope="module")
def setup():
    params = init_params(TINY, seed=1)
    tokens = jax.random.randint(jax.random.key(5), (B, T), 1, TINY.vocab_size)
    mask = jnp.ones((B, T), jnp.int32).at[1, :3].set(0)  # row 1 left-padded by 3
    return params, tokens * mask, mask


@pytest.mark.parametrize(
    "preset,kv,rel_tol",
    [
        ("fp32", None, 1e-5),
        ("bf16", None, 2e-3),
        ("fp8_block", "e4m3", 2e-3),  # per-token activation groups (batch-invariant), FP8 KV
        # per-tensor activation scale depends on the chunk (measured 0.13; 0.18 since attention's
        # output is rounded to bfloat16 before o_proj on both paths)
        ("fp8_tensor", "e4m3", 0.25),
    ],
)
def test_cached_matches_recompute(setup, preset, kv, rel_tol):
    params, tokens, mask = setup
    recipe = _recipe(preset, kv)
    full = jax.jit(forward_logits, static_argnums=(0, 3))(TINY, params, tokens, recipe, mask)
    cached = _cached_logits(recipe, params, tokens, mask)
    chex.assert_equal_shape([full, cached])
    real = np.asarray(mask, bool)
    diff = np.abs(np.asarray(full - cached))[real]
    scale = np.abs(np.asarray(full))[real].max()
    assert diff.max() <= rel_tol * scale, (preset, kv, diff.max(), scale)
    if rel_tol < 0.01:  # greedy next tokens agree wherever the top-2 gap exceeds the tolerance
        top2 = np.sort(np.asarray(full), axis=-1)[..., -2:]
        clear = real & (top2[..., 1] - top2[..., 0] > 2 * rel_tol * scale)
        np.testing.assert_array_equal(
            np.argmax(full, -1)[clear], np.argmax(np.asarray(cached), -1)[clear]
        )


def test_fp8_kv_cache_storage(setup):
    recipe = _recipe("bf16", "e4m3")
    cache = init_cache(TINY, recipe, 2, 6)  # bfloat16 attention: keys slot-major
    chex.assert_shape(cache["layers_0"]["k"], (2, TINY.n_kv_heads, 6, TINY.head_dim))
    chex.assert_shape(cache["layers_0"]["v"], (2, TINY.n_kv_heads, TINY.head_dim, 6))
    chex.assert_shape(cache["layers_0"]["k_scale"], (2, TINY.n_kv_heads, 6, 1))
    chex.assert_shape(cache["layers_0"]["v_scale"], (2, TINY.n_kv_heads, 1, 6))
    assert cache["layers_0"]["v"].dtype == jnp.float8_e4m3fn
    assert cache["key_mask"].shape == (2, 6) and not bool(cache["key_mask"].any())
    assert "k_scale" not in init_cache(TINY, _recipe("bf16", None), 2, 6)["layers_0"]
    fp32 = init_cache(TINY, _recipe("fp32", "e4m3"), 2, 6)["layers_0"]  # keys slot-minor
    chex.assert_shape(fp32["k"], (2, TINY.n_kv_heads, TINY.head_dim, 6))
    chex.assert_shape(fp32["v"], (2, TINY.n_kv_heads, 6, TINY.head_dim))
    chex.assert_shape(fp32["k_scale"], (2, TINY.n_kv_heads, 1, 6))
    chex.assert_shape(fp32["v_scale"], (2, TINY.n_kv_heads, 6, 1))
