"""`calibration.sample="batch"`: one calibration per calibrating RL step on a sample pooled over
all its minibatches, taken after an applied update (never at theta_old), by the program that
computed the old log-probs."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from train_testutil import TINY, make_setup, rollout_batch

from calclip_jax.model.shared_prompt import PromptGroups
from calclip_jax.rl.calibration import calibrated_bounds
from calclip_jax.rl.losses import clamped_ratio
from calclip_jax.train import CalibrationConfig, PPOUpdater, make_update_step
from calclip_jax.train.forward_program import SHADOW_KEY

STATIC = (float(np.float32(0.8)), float(np.float32(1.2)))
ROWS, MINIBATCHES = 32, 4


def _updater(same_forward: bool, lr: float = 5e-2, **setup):
    calib = CalibrationConfig(enabled=True, period=2, ema_beta=0.0, sample="batch")
    cfg, tx, state = make_setup(
        "fp8_tensor", calibration=calib, lr=lr, same_forward=same_forward, **setup
    )
    cfg = dataclasses.replace(cfg, rl=dataclasses.replace(cfg.rl, kl_beta=0.05))
    step = jax.jit(make_update_step(TINY, cfg, tx), donate_argnums=0)
    ref = jax.tree.map(jnp.copy, state.params)  # the state is donated
    updater = PPOUpdater(TINY, cfg, step, num_minibatches=MINIBATCHES, ref_params=ref)
    seen = []
    pool = updater._pool

    def spy(state, minibatches):  # what the pooled calibration sees and gives
        params = jax.tree.map(np.asarray, state.params)
        new_state, metrics, outs = pool(state, minibatches)
        bounds = (float(new_state.clip_lower), float(new_state.clip_upper))
        applied = int(state.batch_updates)
        seen.append({"applied": applied, "params": params, "mbs": minibatches, "outs": outs})
        seen[-1]["bounds"] = bounds
        return new_state, metrics, outs

    updater._pool = spy
    return updater, state, seen


def _concatenated(seen: dict, key: str, old: str) -> np.ndarray:
    return np.concatenate(
        [
            np.asarray(clamped_ratio(out[key], mb[old], mb["response_mask"]))
            for out, mb in zip(seen["outs"], seen["mbs"], strict=True)
        ]
    )


@pytest.mark.parametrize("same_forward", [False, True])
def test_pooled_bounds_are_those_of_the_concatenated_ratios(same_forward):
    updater, state, seen = _updater(same_forward)
    theta_old = jax.tree.map(np.asarray, state.params)
    rng = np.random.default_rng(0)
    state, m, _ = updater.update(state, rollout_batch(batch=ROWS, seed=1), rng, rl_step=1)
    (pool,) = seen
    assert pool["applied"] == 1  # right after the first update: theta_1 != theta_old
    moved = jax.tree.map(lambda a, b: not np.array_equal(a, b), pool["params"], theta_old)
    assert any(jax.tree.leaves(moved))
    rows = np.concatenate([np.asarray(mb["tokens"]) for mb in pool["mbs"]])
    assert len(pool["mbs"]) == MINIBATCHES and len(rows) == ROWS  # every rollout row once
    ratio = _concatenated(pool, "logp", "old_logp")
    ratio_ref = _concatenated(pool, SHADOW_KEY, "old_logp_ref")
    adv = np.concatenate([mb["advantages"] for mb in pool["mbs"]])
    mask = np.concatenate([mb["response_mask"] for mb in pool["mbs"]])
    cfg = updater.update_config
    want = calibrated_bounds(
        ratio, ratio_ref, adv, mask, eps_low=0.2, eps_high=0.2, **cfg.calibration.bounds_kwargs()
    )
    assert pool["bounds"] == tuple(float(b) for b in want)
    assert (m[0]["clip_lower"], m[0]["clip_upper"]) == STATIC  # theta_old: the carried bounds
    for later in m[1:]:  # the pooled bounds, from the second update on
        assert (later["clip_lower"], later["clip_upper"]) == pool["bounds"]
    assert [x["calibrated"] for x in m] == [0.0, 1.0, 0.0, 0.0]
    assert np.isfinite(m[1]["calib_q_lower"]) and np.isnan(m[2]["calib_q_lower"])
    # RL step 2 does not calibrate (period 2): the bounds carry over
    state, m2, _ = updater.update(state, rollout_batch(batch=ROWS, seed=2), rng, rl_step=2)
    assert len(seen) == 1 and (float(state.clip_lower), float(state.clip_upper)) == pool["bounds"]
    assert all(np.isnan(x["calib_q_lower"]) and x["calibrated"] == 0.0 for x in m2)


def test_a_skipped_first_update_defers_the_sample():
    updater, state, seen = _updater(same_forward=False)
    batch = rollout_batch(batch=ROWS, seed=1)
    first_row = updater.plan(ROWS, np.random.default_rng(0))[0][0]
    batch["advantages"][first_row] = np.nan  # the first update's gradient is non-finite
    _, m, _ = updater.update(state, batch, np.random.default_rng(0), rl_step=1)
    assert m[0]["update_skipped"] == 1.0 and m[1]["at_theta_old"] == 1.0
    assert [p["applied"] for p in seen] == [1]  # after the second update, the first applied
    assert [x["calibrated"] for x in m] == [0.0, 0.0, 1.0, 0.0]


@pytest.mark.parametrize(("same_forward", "grouped"), [(False, False), (True, False), (True, True)])
def test_unchanged_parameters_pool_ratios_of_exactly_one(same_forward, grouped):
    """At a learning rate too small to move a parameter every pooled ratio, trainer's and
    shadow's, is exactly 1 (the old log-probs' program, rerun), so the bounds stay static; also
    through micro-batches of shared-prompt groups."""
    setup = {"micro_batches": 2, "shared_prompt": PromptGroups(2, 8)} if grouped else {}
    updater, state, seen = _updater(same_forward, lr=1e-30, **setup)
    batch = rollout_batch(batch=ROWS, seed=1, group=2 if grouped else 1)
    updater.update(state, batch, np.random.default_rng(0), 1)
    (pool,) = seen
    mask = np.concatenate([mb["response_mask"] for mb in pool["mbs"]]).astype(bool)
    assert np.all(_concatenated(pool, "logp", "old_logp")[mask] == 1.0)
    assert np.all(_concatenated(pool, SHADOW_KEY, "old_logp_ref")[mask] == 1.0)
    assert pool["bounds"] == STATIC
