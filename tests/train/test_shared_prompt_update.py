"""PPO updates with a shared prompt (`train.share_prompt`): whole-group minibatches, theta_old,
and the same update as the whole-sequence forward's up to float32 rounding."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from train_testutil import TINY, make_setup, rollout_batch

from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model.shared_prompt import PromptGroups
from calclip_jax.rl.presets import get_preset
from calclip_jax.train import (
    CalibrationConfig,
    PPOUpdater,
    UpdateConfig,
    jit_update_step,
    make_mesh,
    make_update_step,
    shard_state,
)
from calclip_jax.train.update_step import update_flags

G, PROMPT, RESPONSE, ROWS = 4, 4, 8, 16
GROUPS = PromptGroups(G, RESPONSE)


def setup(shared: bool):
    """(cfg, tx, state): fp32, calibrating at every update after the first (EMA 0.5)."""
    calib = CalibrationConfig(enabled=True, period=1, ema_beta=0.5)
    return make_setup("fp32", calibration=calib, lr=1e-2, shared_prompt=GROUPS if shared else None)


def planner(epochs: int = 1) -> PPOUpdater:
    """An updater with nothing compiled: its plan and its input checks."""
    recipe, rl = PrecisionRecipe.preset("fp32"), get_preset("grpo")
    cfg = UpdateConfig(recipe, rl, CalibrationConfig(), 1.0, None, GROUPS, 1, False, "batch")
    return PPOUpdater(TINY, cfg, None, epochs=epochs, num_minibatches=2)


def test_plan_takes_whole_groups():
    up = planner(epochs=2)
    plan = up.plan(ROWS, np.random.default_rng(0))
    assert len(plan) == 4
    for epoch in (plan[:2], plan[2:]):
        assert sorted(np.concatenate(epoch).tolist()) == list(range(ROWS))
    for idx in plan:
        groups_K = idx.reshape(-1, G)
        assert np.all(groups_K % G == np.arange(G))
        assert np.all(groups_K // G == groups_K[:, :1] // G)
    assert any(not np.array_equal(idx, np.sort(idx)) for idx in plan)  # groups are shuffled
    with pytest.raises(ValueError, match="whole groups of 4"):
        up.plan(12, np.random.default_rng(0))  # 3 groups into 2 minibatches


def test_prepare_refuses_rows_that_share_no_prompt():
    up = planner()
    ungrouped = rollout_batch(ROWS, PROMPT, RESPONSE, seed=1)  # every row its own prompt
    with pytest.raises(ValueError, match="differ in 'tokens'"):  # before any forward
        up.prepare(None, ungrouped, up.plan(ROWS, np.random.default_rng(0)), calibrate=True)


@pytest.mark.skipif(jax.device_count() < 8, reason="needs 8 (simulated) devices")
def test_sharded_shared_prompt_update_matches_the_whole_sequence_update():
    """One RL step of 2 minibatches (2 whole groups each), calibrating, the shared-prompt step
    sharded over a (2, 2, 2) mesh (a group per data shard) against the whole-sequence step on
    one device: the ratio is exactly 1 at theta_old, the old log-probs precomputed with the
    shared prompt equal the update's own forward, and parameters and metrics agree to float32
    rounding."""
    batch = rollout_batch(ROWS, PROMPT, RESPONSE, seed=1, group=G)
    runs, plan = {}, None
    for shared in (True, False):  # the shared updater plans whole groups; both run that plan
        cfg, tx, state = setup(shared)
        up = PPOUpdater(TINY, cfg, None, num_minibatches=2, ref_params=state.params)
        plan = plan or up.plan(ROWS, np.random.default_rng(0))
        minibatches = up.prepare(state, batch, plan, calibrate=True)
        step = make_update_step(TINY, cfg, tx)
        if shared:
            mesh = make_mesh(2, 2, 2)
            step, state = (
                jit_update_step(step, state, minibatches[0], mesh),
                shard_state(state, mesh),
            )
        else:
            step = jax.jit(step)
        metrics = []
        for i, mb in enumerate(minibatches):
            state, m = step(state, mb, update_flags(i == 0, True))
            metrics.append({k: float(v) for k, v in m.items()})
        runs[shared] = jax.device_get(state.params), metrics
    (full_params, full_m), (params, m) = runs[False], runs[True]
    assert m[0]["ratio_log_abs_max"] == 0.0 and m[0]["at_theta_old"] == 1.0
    assert m[0]["old_logp_recompute_gap"] < 1e-5
    assert m[1]["calibrated"] == 1.0 and m[1]["ratio_log_abs_max"] > 0
    for a, b in zip(full_m, m, strict=True):
        for name in ("loss", "grad_norm", "entropy", "clip_lower", "clip_upper"):
            np.testing.assert_allclose(b[name], a[name], rtol=1e-4, atol=1e-6, err_msg=name)
    # Adam steps each element by about lr (1e-2) whatever its gradient's size: where that is
    # near 0, float32 rounding moves the step by a fraction of lr
    close = lambda a, b: np.testing.assert_allclose(b, a, atol=1e-4)
    jax.tree.map(close, full_params, params)
