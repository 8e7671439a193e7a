"""Token draws: the default sampler is `jax.random.categorical` token for token; the inverse-CDF
sampler draws the same distribution (a chi-square test at a fixed seed), never a token of zero
probability; both report `jax.nn.log_softmax` at the drawn token."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from rollout_testutil import TINY, init_params, prompts

from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model import forward_logits
from calclip_jax.rollout import filter_logits, sample
from calclip_jax.rollout.sampling import _pick, draw_with_logp, first_argmax, gumbel_max

NEG_INF = -np.inf


def _logits(rows: int, v: int, seed: int) -> np.ndarray:
    """Random logits with ties at the maximum, -inf entries and a row of one finite entry."""
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=(rows, v)) * 3).astype(np.float32)
    x[0, [3, 7]] = x[0].max() + 1.0  # a tie for the maximum
    x[1, ::2] = NEG_INF  # top-k style filtering
    x[2, :] = NEG_INF
    x[2, v - 1] = 0.5  # one finite entry, the last
    x[-1] = np.round(x[-1])  # many ties
    return x


@pytest.mark.parametrize("shape", [(8, 37), (5, 300), (4, 1024)])
def test_first_argmax_is_argmax(shape):
    x = _logits(*shape, seed=shape[1])
    x[0, 5] = x[0, 9] = np.nan  # argmax takes a row's first NaN, before its maximum (3)
    x[1, -1] = np.nan
    for fn in (first_argmax, jax.jit(first_argmax)):
        np.testing.assert_array_equal(fn(jnp.asarray(x)), jnp.argmax(jnp.asarray(x), axis=-1))


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("shape", [(8, 37), (6, 1000), (3, 5000)])
def test_gumbel_sampler_is_categorical_token_for_token(shape, jit):
    x = jnp.asarray(_logits(*shape, seed=1))
    draw = jax.jit(gumbel_max) if jit else gumbel_max
    for seed in range(5):
        key = jax.random.key(seed)
        want = jax.random.categorical(key, x, axis=-1)
        np.testing.assert_array_equal(draw(key, x), want)


def _draws(sampler: str, logits_V: np.ndarray, rows: int, calls: int) -> np.ndarray:
    """Token counts [V] of rows x calls draws from softmax(logits_V)."""
    x = jnp.broadcast_to(jnp.asarray(logits_V), (rows, logits_V.shape[0]))
    fn = jax.jit(functools.partial(draw_with_logp, temperature=1.0, sampler=sampler))
    counts = np.zeros(logits_V.shape[0], np.int64)
    for i in range(calls):
        tok, lp = fn(jax.random.key(100 + i), x)
        want = np.asarray(jax.nn.log_softmax(x, axis=-1))[np.arange(rows), np.asarray(tok)]
        np.testing.assert_array_equal(lp, want)
        counts += np.bincount(np.asarray(tok), minlength=logits_V.shape[0])
    return counts


def _chi2_threshold(dof: int, z: float = 3.719) -> float:
    """The chi-square(dof) quantile at one-sided normal z (3.719: p = 1e-4), Wilson-Hilferty."""
    c = 2.0 / (9.0 * dof)
    return dof * (1.0 - c + z * np.sqrt(c)) ** 3


@pytest.mark.parametrize("sampler", ["gumbel", "cdf"])
def test_samplers_draw_softmax_exactly(sampler):
    """300 tokens (three blocks of the inverse-CDF sampler, the last padded), probabilities from
    0.2 down to 1e-5 and zero (-inf logits), 400,000 draws: a chi-square test over the tokens
    expected at least 5 times, and no token of probability zero."""
    v = 300
    rng = np.random.default_rng(0)
    logits = rng.normal(size=v).astype(np.float32) * 2.0
    logits[:40] = NEG_INF
    logits[200] = 8.0  # about 0.2 of the mass
    logits[250:260] = logits[250:260] - 12.0  # ~1e-6 .. 1e-5
    p = np.asarray(jax.nn.softmax(jnp.asarray(logits)), np.float64)
    counts = _draws(sampler, logits, rows=20_000, calls=20)
    n = counts.sum()
    assert n == 400_000
    assert not counts[:40].any()  # probability zero: never drawn
    expected = n * p
    big = expected >= 5
    rest_obs, rest_exp = counts[~big].sum(), expected[~big].sum()
    stat = np.sum((counts[big] - expected[big]) ** 2 / expected[big])
    stat += (rest_obs - rest_exp) ** 2 / rest_exp
    dof = int(big.sum())  # categories: the big ones and the pooled rest, minus one
    assert stat < _chi2_threshold(dof), (sampler, stat, dof)


def test_pick_never_takes_a_zero_weight_and_handles_u_near_one():
    w = jnp.asarray(
        [[0.0, 1.0, 0.0, 2.0, 0.0], [3.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 1e-30]]
    )
    below_one = jnp.float32(1.0) - jnp.finfo(jnp.float32).epsneg
    for u, want in (
        (0.0, [1, 0, 4]),
        (1 / 3 - 1e-6, [1, 0, 4]),
        (1 / 3 + 1e-6, [3, 0, 4]),
        (below_one, [3, 0, 4]),
    ):
        got = _pick(w, jnp.full((3,), u, jnp.float32))
        np.testing.assert_array_equal(got, want, err_msg=str(u))


def test_sampler_rejects_an_unknown_method():
    with pytest.raises(ValueError, match="sampler must be one of"):
        draw_with_logp(jax.random.key(0), jnp.zeros((1, 4)), 1.0, sampler="multinomial")


def test_cdf_sampler_in_the_decode_loop():
    """`sample(sampler="cdf")` (float32, top-k 8): other draws than the default's, every drawn
    token among the 8 kept, its log-prob that of the truncated distribution (the trainer's
    logits, filtered)."""
    params, (tokens, mask) = init_params(seed=3), prompts(2, 5)
    recipe = PrecisionRecipe.preset("fp32")
    run = functools.partial(
        sample, params, TINY, recipe, tokens, mask, jax.random.key(7), num_samples=3,
        max_new_tokens=6, eos_id=-1, pad_id=0, temperature=1.0, top_k=8,
    )  # fmt: skip
    out = run(sampler="cdf")
    assert not np.array_equal(out.tokens, run().tokens)
    np.testing.assert_array_equal(out.response_len, 6)
    logits = forward_logits(TINY, params, out.tokens, recipe, out.attn_mask)[:, 4:-1]
    kept = filter_logits(logits.reshape(-1, logits.shape[-1]), 8).reshape(logits.shape)
    drawn = out.tokens[:, 5:, None]
    picked = jnp.take_along_axis(jax.nn.log_softmax(kept, -1), drawn, -1)[..., 0]
    np.testing.assert_allclose(out.rollout_logp[:, 5:], picked, atol=1e-4)
    assert int(jnp.max(jnp.sum(logits > jnp.take_along_axis(logits, drawn, -1), -1))) < 8
