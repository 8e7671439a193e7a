"""Numerics and argument checks: log-ratio clamp, dual-clip constant, advantage shapes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calclip_jax.rl import losses
from calclip_jax.rl.calibration import calibrated_bounds
from calclip_jax.rl.diagnostics import rl_diagnostics
from calclip_jax.rl.losses import AGGREGATIONS, broadcast_advantages, kl_penalty, ppo_policy_loss
from calclip_jax.rl.presets import RLPreset

B, T = 4, 5


def _batch(seed=0):
    rng = np.random.default_rng(seed)
    old = rng.uniform(-3.0, -0.1, (B, T)).astype(np.float32)
    logp = (old + rng.uniform(-0.5, 0.5, (B, T))).astype(np.float32)
    mask = np.ones((B, T), bool)
    mask[3, 3:] = False
    adv = np.array([1.0, -1.0, 0.5, -2.0], np.float32)
    return logp, old, mask, adv


def test_clamped_ratio_values_and_gradient():
    base = jnp.zeros(5)
    logp = jnp.array([-100.0, -3.0, 0.5, 100.0, jnp.inf])
    mask = jnp.array([True, True, True, True, False])
    clamp, ratio = losses.LOG_RATIO_CLAMP, losses.clamped_ratio
    assert clamp == 20.0
    want = [*np.exp([-clamp, -3.0, 0.5, clamp]), 1.0]
    np.testing.assert_allclose(np.asarray(ratio(logp, base, mask)), want, rtol=1e-6)
    g = np.asarray(jax.grad(lambda x: jnp.sum(ratio(x, base, mask)))(logp))
    np.testing.assert_allclose(g, [0.0, np.exp(-3.0), np.exp(0.5), 0.0, 0.0], rtol=1e-6)


@pytest.mark.parametrize("agg", AGGREGATIONS)
@pytest.mark.parametrize("dual_clip_c", [None, 3.0])
@pytest.mark.parametrize("log_ratio", [100.0, -100.0])
def test_runaway_log_ratio_gives_finite_loss_and_gradient(agg, dual_clip_c, log_ratio):
    logp, old, mask, adv = _batch()
    logp[:2, 1] = old[:2, 1] + log_ratio  # one A>0 and one A<0 token

    def f(lp):
        return ppo_policy_loss(lp, old, adv, mask, eps_low=0.2, eps_high=0.28, agg=agg,
                               dual_clip_c=dual_clip_c, ref_logp=old, kl_beta=0.1)  # fmt: skip

    (loss, aux), grad = f(logp), jax.grad(lambda x: f(x)[0])(logp)
    assert np.isfinite(float(loss)) and np.isfinite(float(aux["kl_loss"]))
    assert np.all(np.isfinite(np.asarray(grad)))
    assert np.all(np.isfinite(np.asarray(kl_penalty(jnp.asarray(logp), old, "k3"))))


def test_diagnostics_finite_with_runaway_log_ratios():
    logp, old, mask, adv = _batch(1)
    logp[:2, 1] = old[:2, 1] + 100.0
    rollout = old.copy()
    rollout[2, 2] = old[2, 2] - 100.0  # old / rollout = e^100
    out = rl_diagnostics(logp, old, adv, mask, (0.8, 1.28), rollout_logp_BT=rollout,
                         ref_logp_BT=old + 100.0, dual_clip_c=3.0)  # fmt: skip
    for name, value in out.items():
        assert np.isfinite(float(value)), name


@pytest.mark.parametrize("c", [0.5, 1.0, -2.0])
def test_dual_clip_at_most_one_is_rejected(c):
    logp, old, mask, adv = _batch()
    with pytest.raises(ValueError, match="dual_clip_c"):
        ppo_policy_loss(logp, old, adv, mask, eps_low=0.2, eps_high=0.2, dual_clip_c=c)
    with pytest.raises(ValueError, match="dual_clip_c"):
        RLPreset(name="x", dual_clip_c=c)
    with pytest.raises(ValueError, match="dual_clip_c"):
        rl_diagnostics(logp, old, adv, mask, (0.8, 1.2), dual_clip_c=c)


def test_dual_clip_zero_means_off():
    logp, old, mask, adv = _batch()
    assert RLPreset(name="x", dual_clip_c=0.0).dual_clip_c is None
    assert RLPreset(name="x", dual_clip_c=3).dual_clip_c == 3.0
    kw = {"eps_low": 0.2, "eps_high": 0.2}
    g0 = jax.grad(lambda x: ppo_policy_loss(x, old, adv, mask, dual_clip_c=0.0, **kw)[0])(logp)
    g1 = jax.grad(lambda x: ppo_policy_loss(x, old, adv, mask, **kw)[0])(logp)
    np.testing.assert_array_equal(np.asarray(g0), np.asarray(g1))
    assert np.any(np.asarray(g0)[adv < 0] != 0.0)
    jitted = jax.jit(lambda x, c: ppo_policy_loss(x, old, adv, mask, dual_clip_c=c, **kw)[0])
    assert np.isfinite(float(jitted(logp, jnp.float32(3.0))))  # traced c: not checkable, runs


def test_broadcast_advantages_shapes():
    per_seq = jnp.arange(3.0)
    np.testing.assert_array_equal(
        np.asarray(broadcast_advantages(per_seq, (3, 4))), np.repeat(np.arange(3.0)[:, None], 4, 1)
    )
    flat = jnp.arange(12.0)
    np.testing.assert_array_equal(np.asarray(broadcast_advantages(flat, (12,))), np.arange(12.0))
    per_tok = jnp.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(np.asarray(broadcast_advantages(per_tok, (3, 4))), per_tok)
    square = jnp.arange(3.0)  # [B] with a [B, B] mask: still per sequence
    np.testing.assert_array_equal(
        np.asarray(broadcast_advantages(square, (3, 3))), np.repeat(np.arange(3.0)[:, None], 3, 1)
    )


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**16), rule=st.sampled_from(["balance", "quantile", "scaled"]))
def test_calibrated_bounds_flat_tokens_equal_batched(seed, rule):
    rng = np.random.default_rng(seed)
    b, t = 6, 9
    log_ref = rng.normal(0, 0.2, (b, t))
    ratio_ref = np.exp(log_ref).astype(np.float32)
    ratio = np.exp(log_ref + rng.normal(0, 0.1, (b, t))).astype(np.float32)
    adv = rng.normal(size=(b, t)).astype(np.float32)  # per-token advantages
    mask = rng.random((b, t)) < 0.8
    kw = {"eps_low": 0.2, "eps_high": 0.28, "upper_rule": rule}
    want = calibrated_bounds(ratio, ratio_ref, adv, mask, **kw)
    got = calibrated_bounds(ratio.ravel(), ratio_ref.ravel(), adv.ravel(), mask.ravel(), **kw)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
