"""`fused_attention`: dot_product_attention vs `attend`, the rolled form cuDNN gets, dispatch."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

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
