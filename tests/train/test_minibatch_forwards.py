"""The updater's fast path: one jitted call per minibatch for its log-prob forwards, and no
old-policy forward for the first update of a batch outside ratio-dump steps. Both must leave
every update bitwise as it was."""

from __future__ import annotations

import chex
import jax
import numpy as np
import pytest
from train_testutil import TINY, make_setup, rollout_batch

from calclip_jax.train import CalibrationConfig, PPOUpdater, make_update_step

WANTS = ("old_logp", "old_logp_ref", "ref_logp")


@pytest.mark.parametrize("preset", ["fp32", "bf16", "fp8_tensor", "fp8_block"])
def test_one_call_gives_each_forward_bitwise(preset):
    cfg, _, state = make_setup(preset, calibration=CalibrationConfig(enabled=True, period=1))
    updater = PPOUpdater(TINY, cfg, None, num_minibatches=1, ref_params=state.params)
    ref_params = jax.tree.map(lambda x: x * 0.9, state.params)  # another policy than theta_old
    mb = rollout_batch(batch=8, seed=2)
    got = updater._forwards(state.params, state.fp8_meta, ref_params, mb, WANTS)
    chex.assert_trees_all_equal(got["old_logp"], updater._logp(state.params, state.fp8_meta, mb))
    chex.assert_trees_all_equal(got["old_logp_ref"], updater._shadow_logp(state.params, {}, mb))
    chex.assert_trees_all_equal(got["ref_logp"], updater._logp(ref_params, state.fp8_meta, mb))
    assert not np.array_equal(got["old_logp"], got["ref_logp"])  # the two policies differ
    assert updater._forwards(state.params, state.fp8_meta, None, mb, ()) == {}


def _run(preset: str, probe: bool, calibrate: bool):
    calib = CalibrationConfig(enabled=calibrate, period=1)
    cfg, tx, state = make_setup(preset, calibration=calib, lr=3e-2)
    step = jax.jit(make_update_step(TINY, cfg, tx))
    updater = PPOUpdater(TINY, cfg, step, epochs=2, num_minibatches=2, ref_params=state.params)
    rng = np.random.default_rng(0)
    return updater.update(state, rollout_batch(batch=8, seed=3), rng, rl_step=1, probe=probe)


@pytest.mark.parametrize(("preset", "calibrate"), [("fp8_tensor", True)])
def test_skipping_the_first_old_forward_changes_no_update(preset, calibrate):
    """Without a ratio dump the first update's old log-probs are not computed (the step takes
    its own forward there): same parameters and metrics, but for the recompute check."""
    fast, fast_metrics, _ = _run(preset, probe=False, calibrate=calibrate)
    full, full_metrics, _ = _run(preset, probe=True, calibrate=calibrate)
    chex.assert_trees_all_equal(fast.params, full.params)
    chex.assert_trees_all_equal(fast.opt_state, full.opt_state)
    gaps = ("old_logp_recompute_gap", "old_logp_recompute_gap_frac")
    assert all(np.isnan(fast_metrics[0][name]) for name in gaps)
    assert full_metrics[0]["old_logp_recompute_gap"] < 1e-5
    assert full_metrics[0]["old_logp_recompute_gap_frac"] == 0.0
    for fast_m, full_m in zip(fast_metrics, full_metrics, strict=True):
        for name, value in fast_m.items():
            if name not in gaps:
                np.testing.assert_equal(value, full_m[name], err_msg=name)
