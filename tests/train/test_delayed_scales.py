"""Delayed scaling with the scales frozen within a rollout batch (`train.delayed_scales="batch"`,
the default): at unchanged parameters the ratio is 1 at every update of every RL step, the first
included (the histories are primed before the run's first update), and each update's amaxes
still reach the histories the next batch scales from. With "update" (each update scales from the
histories the previous one pushed) the ratio drifts from 1 within a batch."""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest
from train_testutil import TINY, make_setup, rollout_batch

from calclip_jax.config.schema import TrainConfig
from calclip_jax.parallel.mesh import make_mesh
from calclip_jax.train.ppo_update import histories_empty
from calclip_jax.train.trainer import build_trainer

UPDATES = 4  # 2 epochs x 2 minibatches per RL step


@functools.cache
def _two_rl_steps(scales: str, lr: float = 1e-30):
    """Two RL steps through the run's wiring at a learning rate too small to move a float32
    parameter: (histories before, after step 1, after step 2), metrics per update per step."""
    cfg, _, state = make_setup("fp8_delayed", delayed_scales=scales)
    mesh = make_mesh(1, 1, 1, jax.devices()[:1])
    train = TrainConfig(learning_rate=lr)
    trainer = build_trainer(TINY, cfg, train, state.params, mesh, epochs=2, num_minibatches=2)
    state, rng = trainer.state, np.random.default_rng(0)
    histories, metrics = [jax.tree.map(np.asarray, state.fp8_meta)], []
    for rl_step in (1, 2):
        batch = rollout_batch(batch=16, seed=rl_step)
        state, m, _ = trainer.updater.update(state, batch, rng, rl_step=rl_step)
        histories.append(jax.tree.map(np.asarray, state.fp8_meta))
        metrics.append(m)
    return histories, metrics


def test_ratio_is_one_at_every_update_of_every_step():
    """The fused update step against the minibatch forwards of the old log-probs: two compiled
    programs, so float32 rounding at most (with `same_forward`: exactly 0,
    tests/train/test_same_forward.py)."""
    _, metrics = _two_rl_steps("batch")
    for step, per_update in enumerate(metrics, 1):
        assert len(per_update) == UPDATES
        for i, m in enumerate(per_update):
            assert m["ratio_log_abs_max"] < 1e-5, (step, i, m["ratio_log_abs_max"])
            assert m["clip_frac_lower_neg"] == 0.0 and m["clip_frac_upper_pos"] == 0.0


def test_per_update_scales_move_the_ratio_at_unchanged_parameters():
    """The defect "batch" removes: the second update scales from the amax the first pushed,
    its old log-probs from the history as the batch began."""
    _, metrics = _two_rl_steps("update")
    assert metrics[0][0]["ratio_log_abs_max"] == 0.0  # the first update: its own forward
    drift = max(m["ratio_log_abs_max"] for step in metrics for m in step[1:])
    assert drift > 1e-3


def test_histories_are_primed_and_collect_every_update():
    """Before the first update the histories observe the first minibatch's update (dropped);
    each RL step then pushes one amax per update, in either mode."""
    for scales in ("batch", "update"):
        histories, _ = _two_rl_steps(scales)
        assert histories_empty(histories[0])
        primed = int(scales == "batch")
        for step, after in enumerate(histories[1:], 1):
            for path, h in jax.tree_util.tree_leaves_with_path(after):
                pushed = primed + step * UPDATES
                assert np.all(h[:pushed] > 0), (scales, jax.tree_util.keystr(path), h)
                assert np.all(h[pushed:] == 0), (scales, jax.tree_util.keystr(path), h)


def test_both_modes_push_the_same_weight_amaxes():
    """Mode "batch" pushes one amax per update, as "update" does, only into the histories the
    next batch scales from: at unchanged parameters the weights' amaxes are the same numbers (the
    activations' and gradients' depend on the scales they were computed under)."""
    batch_h, _ = _two_rl_steps("batch")
    update_h, _ = _two_rl_steps("update")
    leaves = lambda t: jax.tree_util.tree_leaves_with_path(t)
    kernels = 0
    for (path, b), (_, u) in zip(leaves(batch_h[2]), leaves(update_h[2]), strict=True):
        if "kernel_amax_history" in jax.tree_util.keystr(path):
            # "batch": [step 2's 4 updates, step 1's 4, primed]; "update": [step 2's, step 1's]
            np.testing.assert_array_equal(b[: 2 * UPDATES], u[: 2 * UPDATES])
            kernels += 1
    assert kernels > 0


@pytest.mark.parametrize("same_forward", [False, True])
def test_a_learning_rate_moves_the_policy_and_its_histories(same_forward):
    cfg, _, state = make_setup("fp8_delayed", same_forward=same_forward)
    mesh = make_mesh(1, 1, 1, jax.devices()[:1])
    train = TrainConfig(learning_rate=3e-2)
    trainer = build_trainer(TINY, cfg, train, state.params, mesh, epochs=2, num_minibatches=2)
    after, metrics, _ = trainer.updater.update(
        trainer.state, rollout_batch(batch=16, seed=3), np.random.default_rng(0), rl_step=1
    )
    assert metrics[0]["ratio_log_abs_max"] == 0.0
    assert metrics[-1]["ratio_log_abs_max"] > 1e-3  # later updates see a moved policy
    assert all(np.isfinite(m["loss"]) and m["update_skipped"] == 0.0 for m in metrics)
    assert not histories_empty(after.fp8_meta)
