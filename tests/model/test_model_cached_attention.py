"""The KV cache's layout: what a write then read gives back, and `attend_cached` on it is bitwise
`attend` on the [B, S, K, H] arrays, both op by op or both compiled (the sampler's decode and the
trainer see the same numbers), but for a float32 decode step, which is within float32's rounding
bound of it."""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from model_testutil import TINY

from calclip_jax.fp8 import PrecisionRecipe, TensorPrecision
from calclip_jax.model import attention, kv_cache
from calclip_jax.model.attention_dtype import CACHE_LAYOUTS, attention_compute_dtype

H = TINY.head_dim


def _bskh_from_cache(k: jax.Array, v: jax.Array, dtype: jnp.dtype) -> tuple[jax.Array, ...]:
    layout = CACHE_LAYOUTS[jnp.dtype(dtype)]
    return jnp.einsum(f"{layout['k']}->bskh", k), jnp.einsum(f"{layout['v']}->bskh", v)


@pytest.mark.parametrize("activations", ["fp32", "bf16"])
@pytest.mark.parametrize("storage", ["fp32", "bf16", "e4m3"])
def test_write_then_read_is_the_roundtrip(storage, activations):
    prec = TensorPrecision(storage)
    recipe = dataclasses.replace(PrecisionRecipe.preset(activations), kv_cache=prec)
    b, s, start, t = 3, 9, 2, 4
    x = jax.random.normal(jax.random.key(0), (2, b, t, TINY.n_kv_heads, H), jnp.float32) * 3
    layer = kv_cache.init_cache(TINY, recipe, b, s)["layers_0"]
    layer = jax.jit(kv_cache.write, static_argnums=4)(layer, x[0], x[1], jnp.int32(start), recipe)
    k, v = _bskh_from_cache(*kv_cache.read(layer), attention_compute_dtype(recipe))
    for got, new in ((k, x[0]), (v, x[1])):
        np.testing.assert_array_equal(got[:, start : start + t], kv_cache.roundtrip(new, prec))
        untouched = np.delete(np.asarray(got), np.s_[start : start + t], axis=1)
        assert not untouched.any(), storage


def _inputs(b, t, s, kv_heads, group, seed, dtype=jnp.float32):
    """q, k, v [B, S, K, H], mask, and k, v in the cache's layout for attention in `dtype`."""
    keys = jax.random.split(jax.random.key(seed), 4)
    q = jax.random.normal(keys[0], (b, t, kv_heads * group, H))
    k, v = (jax.random.normal(key, (b, s, kv_heads, H)) for key in keys[1:3])
    mask = jax.random.bernoulli(keys[3], 0.7, (b, t, s)).at[:, :, 0].set(True)
    layout = CACHE_LAYOUTS[jnp.dtype(dtype)]
    k_cache, v_cache = (jnp.einsum(f"bskh->{layout[n]}", x) for n, x in (("k", k), ("v", v)))
    return q, k, v, mask, k_cache, v_cache


@settings(max_examples=4, deadline=None)
@given(
    b=st.integers(1, 4),
    t_bf16=st.sampled_from([(1, True), (3, True), (3, False)]),  # float32 t = 1: below
    s=st.integers(4, 20),
    kv_heads=st.sampled_from([1, 2]),
    group=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
def test_attend_cached_is_attend(b, t_bf16, s, kv_heads, group, seed):
    t, bf16 = t_bf16
    dtype = jnp.bfloat16 if bf16 else jnp.float32
    q, k, v, mask, k_cache, v_cache = _inputs(b, t, s, kv_heads, group, seed, dtype)
    # like with like: op by op, and one compiled program each (XLA may pick another dot kernel
    # for a lone dot than for the same dot in a fused program: jax 0.12's YNNPACK fusion does)
    for wrap in (lambda f: f, lambda f: jax.jit(f, static_argnums=4)):
        want = wrap(attention.attend)(q, k, v, mask, dtype)
        chex.assert_trees_all_equal(
            wrap(attention.attend_cached)(q, k_cache, v_cache, mask, dtype), want
        )


def _float32_bound(q, k, v, mask) -> np.ndarray:
    """Per output element, a bound on |float32 attention - exact| from the format (u = 2^-24):
    each score sums H products (error <= gamma_H * sum|q k| / sqrt(H)); a score error d moves each
    probability by a factor within exp(+-2d), exp and the normalization add a few u each
    (relative, 8u (1 + |score|) taken); the value sum adds gamma_S * sum p |v|."""
    u = 2.0**-24
    gamma = lambda n: n * u / (1 - n * u)
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    group = q.shape[2] // k.shape[2]
    k, v = np.repeat(k, group, axis=2), np.repeat(v, group, axis=2)  # [B, S, N, H]
    h, s = q.shape[-1], k.shape[1]
    abs_qk = np.einsum("btnh,bsnh->bnts", np.abs(q), np.abs(k)) / np.sqrt(h)
    scores = np.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(h)
    m = np.asarray(mask)[:, None]
    d = gamma(h) * np.max(np.where(m, abs_qk, 0), axis=-1, keepdims=True)
    rel = 2 * d + 8 * u * (1 + np.max(np.where(m, np.abs(scores), 0), axis=-1, keepdims=True))
    p = np.where(m, np.exp(scores - np.max(np.where(m, scores, -np.inf), -1, keepdims=True)), 0)
    p /= p.sum(-1, keepdims=True)
    weighted = np.einsum("bnts,bsnh->btnh", p, np.abs(v))
    rel_BTN1 = np.transpose(rel, (0, 2, 1, 3))
    return weighted * (gamma(s) + np.expm1(rel_BTN1))


def _exact(q, k, v, mask) -> np.ndarray:
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    group = q.shape[2] // k.shape[2]
    k, v = np.repeat(k, group, axis=2), np.repeat(v, group, axis=2)
    scores = np.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(q.shape[-1])
    scores = np.where(np.asarray(mask)[:, None], scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    return np.einsum("bnts,bsnh->btnh", p / p.sum(-1, keepdims=True), v)


@settings(max_examples=6, deadline=None)
@given(
    b=st.integers(1, 4),
    s=st.integers(4, 48),
    kv_heads=st.sampled_from([1, 2]),
    group=st.sampled_from([1, 2, 4]),
    scale=st.sampled_from([1.0, 4.0]),
    seed=st.integers(0, 2**16),
)
def test_float32_decode_step_is_attend_within_rounding(b, s, kv_heads, group, scale, seed):
    """The sampler's float32 decode path (`_attend_one_position`, taken by `attend_cached` for one
    query position) and the trainer's `attend` (the matmuls of `_attention`) both lie within
    float32's rounding bound of the float64 attention, jit and not."""
    q, k, v, mask, k_cache, v_cache = _inputs(b, 1, s, kv_heads, group, seed)
    q = q * scale
    exact, bound = _exact(q, k, v, mask), _float32_bound(q, k, v, mask)
    full = jax.jit(attention.attend, static_argnums=4)(q, k, v, mask, jnp.float32)
    assert np.all(np.abs(np.asarray(full) - exact) <= bound)
    cached = attention.attend_cached
    for run in (cached, jax.jit(cached, static_argnums=4)):
        got = np.asarray(run(q, k_cache, v_cache, mask, jnp.float32))
        assert np.all(np.abs(got - exact) <= bound)
        assert np.all(np.abs(got - np.asarray(full)) <= 2 * bound)


def test_float32_decode_step_takes_the_transpose_free_path():
    """`attend_cached` on one float32 query position lowers to matmuls with no transpose around
    them, each a plain [M, K] x [K, N] (the right operand contraction-major: the cache layout);
    bfloat16 keeps `_attention`'s (bitwise above)."""

    def hlo(dtype):
        q, _, _, mask, k_cache, v_cache = _inputs(2, 1, 8, 2, 2, 0, dtype)
        fn = jax.jit(attention.attend_cached, static_argnums=4)
        return fn.lower(q, k_cache, v_cache, mask, dtype).as_text()

    fp32 = hlo(jnp.float32)
    assert "transpose" not in fp32
    dots = [line for line in fp32.splitlines() if "dot_general" in line]
    assert len(dots) == 2 and all("contracting_dims = [3] x [2]" in d for d in dots), dots
    assert "transpose" in hlo(jnp.bfloat16)


def test_differentiated_cached_attention_saves_no_scores():
    """The shared-prompt forward differentiates `attend_cached`: it keeps q and the cache for
    the backward, no [B, heads, T, S] scores or probabilities."""
    q, _, _, mask, k_cache, v_cache = _inputs(2, 3, 8, 2, 2, 0, jnp.bfloat16)
    fn = lambda q, k, v: attention.attend_cached(q, k, v, mask, jnp.bfloat16)
    saved = jax.eval_shape(lambda *a: jax.tree.leaves(jax.vjp(fn, *a)[1]), q, k_cache, v_cache)
    assert saved and all(x.shape[-2:] != mask.shape[-2:] for x in saved if x.dtype != bool)


def _plain_bf16_attention(q, k, v, mask):
    """`_attention` on bfloat16 [B, S, K, H] operands before its matmuls declared the bf16 x bf16
    -> f32 algorithm (default precision)."""
    b, t, n, h = q.shape
    kh = k.shape[2]
    q = q.reshape(b, t, kh, n // kh, h).astype(jnp.bfloat16)
    scores = jnp.einsum(
        "btkrh,bskh->bkrts", q, k.astype(jnp.bfloat16), preferred_element_type=jnp.float32
    ) / jnp.sqrt(jnp.float32(h))
    probs = jax.nn.softmax(jnp.where(mask[:, None, None], scores, attention._MASKED), axis=-1)
    out = jnp.einsum(
        "bkrts,bskh->btkrh",
        probs.astype(jnp.bfloat16),
        v.astype(jnp.bfloat16),
        preferred_element_type=jnp.float32,
    )
    return out.astype(jnp.bfloat16).astype(jnp.float32).reshape(b, t, n, h)


@pytest.mark.parametrize("t", [1, 5])
def test_bf16_algorithm_keeps_the_forward_bits(t):
    """Declaring the bf16 x bf16 -> f32 algorithm (so the backward's dots take bf16 operands)
    leaves the forward bitwise the plain bf16 dots' on this CPU, jit and not: every committed
    bf16 / FP8 rollout keeps its tokens."""
    q, k, v, mask, _, _ = _inputs(3, t, 11, 2, 2, 0, jnp.bfloat16)
    for run in (lambda f, *a: f(*a), lambda f, *a: jax.jit(f)(*a)):
        new = run(lambda *a: attention.attend(*a, jnp.bfloat16), q, k, v, mask)
        chex.assert_trees_all_equal(new, run(_plain_bf16_attention, q, k, v, mask))
