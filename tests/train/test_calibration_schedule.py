"""Calibration counts its period in RL steps and never uses an update at theta_old."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from train_testutil import TINY, make_setup, prepared, rollout_batch

from calclip_jax.train import CalibrationConfig, PPOUpdater, make_update_step, update_flags


def _updater(period: int, ema_beta: float, minibatches: int = 4):
    calib = CalibrationConfig(enabled=True, period=period, ema_beta=ema_beta)
    cfg, tx, state = make_setup("fp8_tensor", calibration=calib, lr=5e-2)
    step = jax.jit(make_update_step(TINY, cfg, tx), donate_argnums=0)
    ref = jax.tree.map(jnp.copy, state.params)  # the state is donated
    updater = PPOUpdater(TINY, cfg, step, num_minibatches=minibatches, ref_params=ref)
    return updater, state


def test_period_counts_rl_steps():
    updater, _ = _updater(period=20, ema_beta=0.0)
    assert [s for s in range(1, 62) if updater.calibrates(s)] == [1, 21, 41, 61]


def test_period_20_with_4_minibatches_moves_the_bounds():
    """Regression: a period counted in updates, a multiple of the updates per batch, put every
    calibration on a batch's first update, where r == r_ref == 1 and the bounds stay static."""
    updater, state = _updater(period=20, ema_beta=0.0)
    rng = np.random.default_rng(0)
    state, m1, _ = updater.update(state, rollout_batch(batch=32, seed=1), rng, rl_step=1)
    assert [m["calibrated"] for m in m1] == [0.0, 1.0, 1.0, 1.0]
    # a bound moves off the static (0.8, 1.2) (the lower one stays where the FP8 ratios clip the
    # same A<0 tokens as the shadow's: calibration then reproduces the static lower bound)
    static = pytest.approx((0.8, 1.2), abs=1e-7)
    moved = [m for m in m1[1:] if (m["clip_lower"], m["clip_upper"]) != static]
    assert moved, [(m["clip_lower"], m["clip_upper"]) for m in m1]
    for m in m1[1:]:  # without EMA, FP8 clips exactly the shadow's share of A<0 tokens
        assert m["clip_frac_lower_neg"] == pytest.approx(m["calib_q_lower"], abs=1e-6)
    bounds = (float(state.clip_lower), float(state.clip_upper))
    for rl_step in (2, 3):  # not due: the bounds carry over unchanged
        state, m, _ = updater.update(state, rollout_batch(batch=32, seed=rl_step), rng, rl_step)
        assert all(x["calibrated"] == 0.0 for x in m)
        assert all(np.isnan(x["calib_q_lower"]) for x in m)
        assert (float(state.clip_lower), float(state.clip_upper)) == bounds


def test_ema_never_takes_a_degenerate_sample():
    """With EMA, bounds stay at their warm start until an update where theta != theta_old, even
    when the first update of the batch is skipped (non-finite) and the second is at theta_old."""
    calib = CalibrationConfig(enabled=True, period=1, ema_beta=0.5)
    cfg, tx, state = make_setup("fp8_tensor", calibration=calib, lr=5e-2)
    step = jax.jit(make_update_step(TINY, cfg, tx))
    batch = prepared(cfg, state, batch=16)
    poisoned = dict(batch, advantages=np.where(np.arange(16) == 0, np.nan, batch["advantages"]))
    state, m0 = step(state, poisoned, update_flags(new_batch=True, calibrate=True))
    assert float(m0["update_skipped"]) == 1.0 and float(m0["calibrated"]) == 0.0
    state, m1 = step(state, batch, update_flags(new_batch=False, calibrate=True))
    assert float(m1["at_theta_old"]) == 1.0 and float(m1["calibrated"]) == 0.0
    assert (float(state.clip_lower), float(state.clip_upper)) == pytest.approx((0.8, 1.2))
    state, m2 = step(state, batch, update_flags(new_batch=False, calibrate=True))
    assert float(m2["at_theta_old"]) == 0.0 and float(m2["calibrated"]) == 1.0


def test_bounds_survive_a_skipped_update():
    """Bounds are selected by `finite` like the parameters: a skipped update keeps them."""
    calib = CalibrationConfig(enabled=True, period=1, ema_beta=0.0)
    cfg, tx, state = make_setup("fp8_tensor", calibration=calib, lr=5e-2)
    step = jax.jit(make_update_step(TINY, cfg, tx))
    batch = prepared(cfg, state, batch=16)
    state, _ = step(state, batch, update_flags(new_batch=True, calibrate=True))
    state = state.replace(clip_lower=jnp.float32(0.7), clip_upper=jnp.float32(1.3))
    poisoned = dict(batch, advantages=np.full(16, np.nan, np.float32))
    state, m = step(state, poisoned, update_flags(new_batch=False, calibrate=True))
    assert float(m["update_skipped"]) == 1.0
    assert (float(state.clip_lower), float(state.clip_upper)) == pytest.approx((0.7, 1.3))
