"""`train.same_forward`: old and new log-probs from one compiled forward program, so at
unchanged parameters the ratio is exactly 1 at every update of a batch (not only the first), in
the trainer's precision (delayed scaling too: its scales frozen within the batch, primed before
the first) and in the BF16 shadow; with a learning rate, the update is the fused
program's to float32 rounding."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
from train_testutil import TINY, make_setup, one_rl_step_sgd, rollout_batch

from calclip_jax.config.schema import TrainConfig
from calclip_jax.fp8 import PRESETS
from calclip_jax.parallel.mesh import make_mesh
from calclip_jax.rl.diagnostics import SHADOW_METRICS
from calclip_jax.train import CalibrationConfig
from calclip_jax.train.trainer import build_trainer

EPS32 = float(np.finfo(np.float32).eps)


def _unchanged_parameters(preset: str, same_forward: bool, micro: int = 1) -> list[dict]:
    """One RL step of 2 epochs x 2 minibatches through the run's wiring (sharded, donating
    step) at a learning rate too small to move a float32 parameter; calibrating every update."""
    calib = CalibrationConfig(enabled=True, period=1, ema_beta=0.0)
    cfg, _, state = make_setup(preset, calibration=calib, same_forward=same_forward)
    cfg = dataclasses.replace(cfg, micro_batches=micro)
    train = TrainConfig(learning_rate=1e-30)
    mesh = make_mesh(1, 1, 1, jax.devices()[:1])
    trainer = build_trainer(TINY, cfg, train, state.params, mesh, epochs=2, num_minibatches=2)
    before = jax.tree.map(np.asarray, trainer.state.params)
    batch = rollout_batch(batch=16, seed=3)
    after, metrics, _ = trainer.updater.update(
        trainer.state, batch, np.random.default_rng(0), rl_step=1
    )
    same = jax.tree.map(lambda a, b: np.array_equal(a, np.asarray(b)), before, after.params)
    assert all(jax.tree.leaves(same)), "the learning rate moved a parameter"
    return metrics


@pytest.mark.parametrize("preset", PRESETS)
def test_ratio_is_exactly_one_at_every_update_at_unchanged_parameters(preset):
    metrics = _unchanged_parameters(preset, same_forward=True)
    for i, m in enumerate(metrics):
        assert m["ratio_log_abs_max"] == 0.0, (i, m["ratio_log_abs_max"])
        assert m["clip_frac_lower_neg"] == 0.0 and m["clip_frac_upper_pos"] == 0.0
    later = metrics[1:]
    # the shadow's ratio is exactly 1 too: it clips nothing where it is measured
    for name in SHADOW_METRICS:
        assert all(m[name] == 0.0 for m in later), name
    assert metrics[0]["old_logp_recompute_gap"] == 0.0  # the program against itself


@pytest.mark.parametrize("preset", ["fp8_tensor", "fp8_delayed"])
def test_micro_batches_and_one_program_together(preset):
    metrics = _unchanged_parameters(preset, same_forward=True, micro=2)
    assert all(m["ratio_log_abs_max"] == 0.0 for m in metrics)


@pytest.mark.parametrize("preset", ["fp32", "fp8_block"])
def test_the_update_is_the_fused_programs(preset):
    """SGD, lr 1: the parameter move (the gradient) equals the fused update's, to float32
    rounding in fp32; in FP8, to a share of the move (the programs round apart, and a float8
    rounding flip moves an element by a quantization step)."""
    before, fused, m_fused = one_rl_step_sgd(preset, 1, lr=1.0)
    _, one, m_one = one_rl_step_sgd(preset, 1, lr=1.0, same_forward=True)
    for w, p, b in zip(*(jax.tree.leaves(t) for t in (fused, one, before)), strict=True):
        if preset == "fp32":
            bound = 16 * EPS32 * (np.max(np.abs(w - b)) + np.max(np.abs(b)))
            np.testing.assert_array_less(np.abs(p - w), bound)
        else:
            assert np.linalg.norm(p - w) <= 0.05 * np.linalg.norm(w - b)
    assert m_one[0]["loss"] == pytest.approx(m_fused[0]["loss"], rel=1e-5)


def test_per_update_delayed_scales_are_refused():
    with pytest.raises(ValueError, match="delayed_scales='update'"):
        make_setup("fp8_delayed", same_forward=True, delayed_scales="update")


@pytest.mark.parametrize(
    ("sample", "shadow_every", "calls"),
    [
        ("minibatch", None, 3 + 3),  # theta_old: minibatches 2-4; updates 2-4 calibrate on it
        ("batch", None, 4 + 4),  # theta_old and theta_1: the pooled sample; no update reads it
        ("batch", 1, 4 + 4 + 2),  # + updates 3-4 measure it (update 2 reuses the pool's)
    ],
)
def test_the_shadow_program_runs_where_the_shadow_is_read(sample, shadow_every, calls):
    """One calibrating RL step of 4 minibatch updates at unchanged parameters: the shadow's
    program runs only where something reads the shadow (not for the first update, at theta_old;
    not for the updates of a pooled calibration's step that measure no shadow), and where it is
    read its ratio is exactly 1."""
    calib = CalibrationConfig(
        enabled=True, period=1, ema_beta=0.0, sample=sample, shadow_every=shadow_every
    )
    cfg, _, state = make_setup("fp8_tensor", calibration=calib, same_forward=True)
    mesh = make_mesh(1, 1, 1, jax.devices()[:1])
    train = TrainConfig(learning_rate=1e-30)
    trainer = build_trainer(TINY, cfg, train, state.params, mesh, epochs=1, num_minibatches=4)
    updater, ran = trainer.updater, []
    shadow_program = updater._shadow_program

    def counted(*args):
        ran.append(1)
        return shadow_program(*args)

    updater._shadow_program = counted
    batch = rollout_batch(batch=16, seed=3)
    _, metrics, _ = updater.update(trainer.state, batch, np.random.default_rng(0), rl_step=1)
    assert len(ran) == calls
    assert all(m["ratio_log_abs_max"] == 0.0 for m in metrics)
    for name in SHADOW_METRICS:  # where measured (after the first update) the shadow clips none
        assert all(m[name] == 0.0 or np.isnan(m[name]) for m in metrics[1:]), name
