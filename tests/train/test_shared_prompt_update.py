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


def updater(shared: bool, minibatches: int = 2, epochs: int = 1):
    calib = CalibrationConfig(enabled=True, period=1, ema_beta=0.0)
    cfg, tx, state = make_setup(
        "fp32", calibration=calib, lr=3e-2, shared_prompt=GROUPS if shared else None
    )
    step = jax.jit(make_update_step(TINY, cfg, tx))
    return PPOUpdater(TINY, cfg, step, epochs, minibatches, ref_params=state.params), state


def test_plan_takes_whole_groups():
    cfg = UpdateConfig(
        PrecisionRecipe.preset("fp32"), get_preset("grpo"), CalibrationConfig(), 1.0, None, GROUPS
    )
    up = PPOUpdater(TINY, cfg, None, epochs=2, num_minibatches=2)
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
    up, state = updater(shared=True)
    ungrouped = rollout_batch(ROWS, PROMPT, RESPONSE, seed=1)  # every row its own prompt
    with pytest.raises(ValueError, match="differ in 'tokens'"):
        up.prepare(state, ungrouped, up.plan(ROWS, np.random.default_rng(0)), calibrate=True)


def run(shared: bool, plan: list[np.ndarray]):
    """One RL step on `plan` (calibrating); the final params and each update's metrics."""
    up, state = updater(shared)
    batch = rollout_batch(ROWS, PROMPT, RESPONSE, seed=1, group=G)
    metrics = []
    for i, mb in enumerate(up.prepare(state, batch, plan, calibrate=True)):
        state, m = up.update_step(state, mb, update_flags(i == 0, True))
        metrics.append({k: float(v) for k, v in m.items()})
    return jax.tree.map(np.asarray, state.params), metrics


def test_shared_prompt_update_matches_the_whole_sequence_update():
    """float32, 2 minibatches of whole groups, calibrating: the ratio is exactly 1 at theta_old,
    the old log-probs precomputed with the shared prompt equal the update's own forward, and
    the updated parameters agree with the whole-sequence update's to float32 rounding."""
    plan = updater(shared=True)[0].plan(ROWS, np.random.default_rng(0))
    full_params, full_m = run(False, plan)
    params, m = run(True, plan)
    assert m[0]["ratio_log_abs_max"] == 0.0 and m[0]["at_theta_old"] == 1.0
    assert m[0]["old_logp_recompute_gap"] < 1e-5
    assert m[1]["calibrated"] == 1.0 and m[1]["ratio_log_abs_max"] > 0
    for a, b in zip(full_m, m, strict=True):
        np.testing.assert_allclose(b["loss"], a["loss"], rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(b["grad_norm"], a["grad_norm"], rtol=1e-4)
    for a, b in zip(jax.tree.leaves(full_params), jax.tree.leaves(params), strict=True):
        np.testing.assert_allclose(b, a, atol=1e-5)


@pytest.mark.skipif(jax.device_count() < 8, reason="needs 8 (simulated) devices")
def test_sharded_shared_prompt_step_matches_single_device():
    """Two shared-prompt updates (at theta_old, then calibrating) on a (2, 2, 2) mesh, each data
    shard two whole groups: the single-device updates' parameters and metrics."""
    calib = CalibrationConfig(enabled=True, period=1, ema_beta=0.5)
    cfg, tx, state = make_setup("fp32", calibration=calib, lr=1e-2, shared_prompt=GROUPS)
    up = PPOUpdater(TINY, cfg, None, num_minibatches=1, ref_params=state.params)
    batch = rollout_batch(ROWS, PROMPT, RESPONSE, seed=1, group=G)
    mb = up.prepare(state, batch, [np.arange(ROWS)], calibrate=True)[0]
    step = make_update_step(TINY, cfg, tx)
    mesh = make_mesh(2, 2, 2)
    runs = {"single": (state, jax.jit(step))}
    runs["sharded"] = (shard_state(state, mesh), jit_update_step(step, state, mb, mesh))
    out = {}
    for name, (s, fn) in runs.items():
        for i in range(2):
            s, metrics = fn(s, mb, update_flags(i == 0, True))
        out[name] = jax.device_get((s.params, metrics))
    (params, metrics), (ref_params, ref_metrics) = out["sharded"], out["single"]
    # Adam steps each element by about lr (1e-2) whatever its gradient's size: where that is
    # near 0, float32 rounding moves the step by a fraction of lr (measured: 6e-5, 1 of 1024)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-4), params, ref_params)
    assert float(metrics["calibrated"]) == 1.0
    for name in ("loss", "clip_lower", "clip_upper", "entropy", "grad_norm"):
        np.testing.assert_allclose(metrics[name], ref_metrics[name], rtol=1e-4, err_msg=name)
