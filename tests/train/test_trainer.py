"""The one trainer factory: the update step it wires starts at r == 1, the KL reference is a
copy of theta_0 that the (state-donating) updates leave alone, and its updater takes the
run's minibatch count."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
from train_testutil import TINY, make_setup, rollout_batch

from calclip_jax.config.schema import TrainConfig
from calclip_jax.parallel.mesh import make_mesh
from calclip_jax.rl.presets import get_preset
from calclip_jax.train.trainer import build_trainer


def test_trainer_updates_with_a_donated_state_and_a_kept_kl_reference():
    rl = dataclasses.replace(get_preset("grpo"), kl_beta=0.04)
    cfg, _, state = make_setup("bf16", rl=rl)
    theta_0 = jax.tree.map(np.asarray, state.params)
    trainer = build_trainer(TINY, cfg, TrainConfig(learning_rate=1e-2, num_minibatches=2),
                            state.params, make_mesh(1, 1, 1, jax.devices()[:1]))  # fmt: skip
    assert trainer.updater.num_minibatches == 2 and trainer.updater.epochs == 1
    start = trainer.state
    new, metrics, _ = trainer.updater.update(
        start, rollout_batch(batch=8, seed=1), np.random.default_rng(0), rl_step=1, probe=False
    )
    assert len(metrics) == 2 and int(new.batch_updates) == 2
    assert metrics[0]["ratio_log_abs_max"] == 0.0  # r == 1 at theta_old
    ref = trainer.updater.ref_params  # the KL reference: theta_0, not the donated buffers
    for got, want in zip(jax.tree.leaves(ref), jax.tree.leaves(theta_0), strict=True):
        np.testing.assert_array_equal(np.asarray(got), want)
    moved = [np.abs(np.asarray(a) - b).max() for a, b in
             zip(jax.tree.leaves(new.params), jax.tree.leaves(theta_0), strict=True)]  # fmt: skip
    assert max(moved) > 0.0
