"""`fused_attention`: dot_product_attention vs `attend` and (float32) vs float64, its gradient,
the residuals it saves, the rolled form cuDNN gets, dispatch by backend and dtype."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_model_cached_attention import _exact, _float32_bound

from calclip_jax.model import fused_attention
from calclip_jax.model.attention import attend
from calclip_jax.model.fused_attention import (
    default_implementation,
    full_sequence_attention,
    is_one_run_per_row,
    masked_attention,
    roll_rows,
    run_attention,
)

B, T, N, K, H = 3, 12, 4, 2, 16  # GQA: 2 query heads per key/value head
BF16_EPS = 2.0**-8  # bfloat16 relative spacing: one rounding of the output at most


def _key_mask() -> jax.Array:
    """Row 0 full, row 1 left-padded by 4, row 2 left-padded by 2 and right-padded by 3."""
    slot = jnp.arange(T)
    return jnp.stack([slot >= 0, slot >= 4, (slot >= 2) & (slot < T - 3)])


def _causal(key_mask_BS: jax.Array) -> jax.Array:
    return jnp.tril(jnp.ones((T, T), bool))[None] & key_mask_BS[:, None, :]


def _qkv(seed: int = 0) -> tuple[jax.Array, jax.Array, jax.Array]:
    kq, kk, kv = jax.random.split(jax.random.key(seed), 3)
    return (
        jax.random.normal(kq, (B, T, N, H)),
        jax.random.normal(kk, (B, T, K, H)),
        jax.random.normal(kv, (B, T, K, H)),
    )


@pytest.mark.parametrize("jit", [False, True])
def test_matches_attend_on_real_rows(jit):
    q, k, v = _qkv()
    key_mask = _key_mask()
    mask = _causal(key_mask)
    fn = jax.jit(full_sequence_attention, static_argnums=4) if jit else full_sequence_attention
    out = fn(q, k, v, mask, jnp.bfloat16)
    ref = attend(q, k, v, mask, jnp.bfloat16)
    assert out.dtype == jnp.float32 and out.shape == (B, T, N, H)
    real = np.asarray(key_mask)
    err = np.abs(np.asarray(out - ref))[real]
    assert err.max() <= BF16_EPS * np.abs(np.asarray(ref))[real].max()


def test_run_form_matches_masked_form_on_real_rows():
    """The cuDNN form (rows rolled to a prefix, causal + lengths), run by XLA here."""
    q, k, v = (x.astype(jnp.bfloat16) for x in _qkv(1))
    key_mask = _key_mask()
    runs = run_attention(q, k, v, key_mask, "xla").astype(jnp.float32)
    masked = masked_attention(q, k, v, _causal(key_mask)).astype(jnp.float32)
    real = np.asarray(key_mask)
    err = np.abs(np.asarray(runs - masked))[real]
    assert err.max() <= BF16_EPS * np.abs(np.asarray(masked))[real].max()
    np.testing.assert_array_equal(np.asarray(runs)[~real], 0.0)  # padding queries: zeros


def test_one_run_per_row_and_roll():
    assert bool(is_one_run_per_row(_key_mask()))
    assert bool(is_one_run_per_row(jnp.zeros((2, T), bool)))
    holes = _key_mask().at[0, 5].set(False)
    assert not bool(is_one_run_per_row(holes))
    x = jnp.arange(2 * 5).reshape(2, 5)
    rolled = roll_rows(x, jnp.array([0, 2]))
    np.testing.assert_array_equal(rolled, [[0, 1, 2, 3, 4], [7, 8, 9, 5, 6]])
    np.testing.assert_array_equal(roll_rows(rolled, -jnp.array([0, 2])), x)


def test_cpu_picks_xla():
    assert default_implementation(128) == "xla"


def _real_rows(key_mask: jax.Array) -> np.ndarray:
    """[B, T] query rows with a valid key (the others attend to nothing)."""
    return np.asarray(_causal(key_mask).any(-1))


@pytest.mark.parametrize("jit", [False, True])
def test_float32_operands_within_float32_rounding_of_float64(jit):
    """The fp32 recipe's path: float32 operands at HIGHEST precision, within float32's rounding
    bound of the float64 attention (the bound of `test_model_cached_attention`)."""
    q, k, v = (x * 3 for x in _qkv(2))
    mask = _causal(_key_mask())
    fn = jax.jit(full_sequence_attention, static_argnums=4) if jit else full_sequence_attention
    got = np.asarray(fn(q, k, v, mask, jnp.float32))
    real = _real_rows(_key_mask())
    with np.errstate(invalid="ignore"):  # rows without a valid key: NaN, not compared
        exact, bound = _exact(q, k, v, mask), _float32_bound(q, k, v, mask)
    assert np.all(np.abs(got - exact)[real] <= bound[real])


def _grads(fn, dtype, q, k, v, mask, w):
    loss = lambda q, k, v: jnp.sum(fn(q, k, v, mask, dtype) * w)
    return jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(q, k, v)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_gradients_match_materialized_attention(dtype):
    """The rematerialized backward against `attend`'s float32 one: float32 to float32 rounding;
    bfloat16 operands (and cotangents) within a few bfloat16 roundings of the largest entry."""
    q, k, v = _qkv(3)
    mask = _causal(_key_mask())
    w = jax.random.normal(jax.random.key(4), q.shape) * _real_rows(_key_mask())[..., None, None]
    got = _grads(full_sequence_attention, dtype, q, k, v, mask, w)
    want = _grads(attend, jnp.float32, q, k, v, mask, w)
    tol = 1e-5 if dtype == jnp.float32 else 8 * BF16_EPS
    for g, r in zip(got, want, strict=True):
        assert np.abs(np.asarray(g - r)).max() <= tol * np.abs(np.asarray(r)).max()


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_backward_saves_operands_only(dtype):
    """What the forward keeps for the backward: q, k, v in `dtype` and the mask, no [B, N, T, S]
    scores or probabilities."""
    q, k, v = _qkv()
    mask = _causal(_key_mask())
    fn = lambda q, k, v: full_sequence_attention(q, k, v, mask, dtype)
    saved = jax.eval_shape(lambda *a: jax.tree.leaves(jax.vjp(fn, *a)[1]), q, k, v)
    shapes = sorted((x.shape, jnp.dtype(x.dtype)) for x in saved)
    want = [(x.shape, jnp.dtype(dtype)) for x in (q, k, v)] + [(mask.shape, jnp.dtype(bool))]
    assert shapes == sorted(want)


class _Backend:
    platform, platform_version = "gpu", "cuda 12080"


def test_cuda_picks_cudnn_for_bfloat16_only(monkeypatch):
    monkeypatch.setattr(fused_attention, "get_backend", _Backend)
    assert default_implementation(64) == "cudnn"
    assert default_implementation(64, jnp.float32) == "xla"  # cuDNN takes no float32
    assert default_implementation(160) == "xla"
