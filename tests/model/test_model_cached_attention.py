"""The KV cache's layout: what a write then read gives back, and `attend_cached` on it is bitwise
`attend` on the [B, S, K, H] arrays (the sampler's decode and the trainer see the same numbers)."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from model_testutil import TINY

from calclip_jax.fp8 import TensorPrecision
from calclip_jax.model import attention, kv_cache

H = TINY.head_dim


def _bskh_from_cache(k_BKSH: jax.Array, v_BKHS: jax.Array) -> tuple[jax.Array, jax.Array]:
    return jnp.transpose(k_BKSH, (0, 2, 1, 3)), jnp.transpose(v_BKHS, (0, 3, 1, 2))


@pytest.mark.parametrize("storage", ["fp32", "bf16", "e4m3"])
def test_write_then_read_is_the_roundtrip(storage):
    prec = TensorPrecision(storage)
    b, s, start, t = 3, 9, 2, 4
    x = jax.random.normal(jax.random.key(0), (2, b, t, TINY.n_kv_heads, H), jnp.float32) * 3
    layer = kv_cache.init_cache(TINY, prec, b, s)["layers_0"]
    layer = jax.jit(kv_cache.write, static_argnums=4)(layer, x[0], x[1], jnp.int32(start), prec)
    k, v = _bskh_from_cache(*kv_cache.read(layer))
    for got, new in ((k, x[0]), (v, x[1])):
        np.testing.assert_array_equal(got[:, start : start + t], kv_cache.roundtrip(new, prec))
        untouched = np.delete(np.asarray(got), np.s_[start : start + t], axis=1)
        assert not untouched.any(), storage


@settings(max_examples=4, deadline=None)
@given(
    b=st.integers(1, 4),
    t=st.sampled_from([1, 3]),
    s=st.integers(4, 20),
    kv_heads=st.sampled_from([1, 2]),
    group=st.sampled_from([1, 2]),
    bf16=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_attend_cached_is_attend(b, t, s, kv_heads, group, bf16, seed):
    keys = jax.random.split(jax.random.key(seed), 4)
    q = jax.random.normal(keys[0], (b, t, kv_heads * group, H))
    k, v = (jax.random.normal(key, (b, s, kv_heads, H)) for key in keys[1:3])
    mask = jax.random.bernoulli(keys[3], 0.7, (b, t, s)).at[:, :, 0].set(True)
    dtype = jnp.bfloat16 if bf16 else jnp.float32
    k_cache, v_cache = jnp.transpose(k, (0, 2, 1, 3)), jnp.transpose(v, (0, 2, 3, 1))
    want = jax.jit(attention.attend, static_argnums=4)(q, k, v, mask, dtype)
    cached = attention.attend_cached
    for run in (cached, jax.jit(cached, static_argnums=4)):
        chex.assert_trees_all_equal(run(q, k_cache, v_cache, mask, dtype), want)
