"""The update step: metrics, plain-PPO equivalence, non-finite skip, delayed state, calibration."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from train_testutil import TINY, make_setup, prepared, rollout_batch

from calclip_jax.model import Transformer, token_logprobs_and_entropy
from calclip_jax.rl.corrections import CorrectionConfig
from calclip_jax.rl.diagnostics import (
    CLIP_METRICS,
    MISMATCH_METRICS,
    RATIO_QUANTILE_METRICS,
    SHADOW_METRICS,
)
from calclip_jax.rl.losses import ppo_policy_loss
from calclip_jax.rl.presets import get_preset
from calclip_jax.train import (
    CalibrationConfig,
    PPOUpdater,
    create_train_state,
    make_update_step,
    update_flags,
)
from calclip_jax.train.ppo_update import minibatch_keys

FIRST = update_flags(new_batch=True, calibrate=True)  # first update of a calibrating RL step
LATER = update_flags(new_batch=False, calibrate=True)  # a later update of it

DIAGNOSTICS = (
    "entropy",
    *CLIP_METRICS,
    *RATIO_QUANTILE_METRICS,
    *MISMATCH_METRICS,
    "tis_trunc_frac",
    "grad_norm",
    *SHADOW_METRICS,
)


def test_fp8_calibrated_step_reports_every_diagnostic():
    rl = dataclasses.replace(get_preset("dapo"), correction=CorrectionConfig(mode="token_tis"))
    calib = CalibrationConfig(enabled=True, period=1)
    cfg, tx, state = make_setup("fp8_block", rl=rl, calibration=calib)
    batch = prepared(cfg, state)
    step = jax.jit(make_update_step(TINY, cfg, tx))
    state, m1 = step(state, batch, FIRST)
    state, m2 = step(state, batch, LATER)
    for name in DIAGNOSTICS:
        assert name in m2, name
        assert np.isfinite(m2[name]), (name, m2[name])
    # first update: theta == theta_old, the ratio is exactly 1, nothing is clipped or calibrated
    assert float(m1["ratio_log_abs_max"]) == 0.0 and float(m1["clip_frac_lower_neg"]) == 0.0
    assert float(m1["calibrated"]) == 0.0 and float(m1["clip_frac_lower_neg_ref"]) == 0.0
    assert int(state.update_count) == 2 and float(m2["calibrated"]) == 1.0


def test_chunked_logprobs_give_the_same_step():
    """train.logprob_chunk (3: a padded last chunk) vs whole-sequence log-probs: the same update
    (FP8 trainer with delayed state, bf16 lm_head and shadow) to float32 rounding."""
    calib = CalibrationConfig(enabled=True, period=1)
    runs = []
    for chunk in (None, 3):
        cfg, tx, state = make_setup("fp8_delayed", calibration=calib, logprob_chunk=chunk)
        batch = prepared(cfg, state)
        step = jax.jit(make_update_step(TINY, cfg, tx))
        state, m1 = step(state, batch, FIRST)
        state, m2 = step(state, batch, LATER)
        runs.append((batch, state, m1, m2))
    (b0, s0, *m0), (b1, s1, *m1) = runs
    np.testing.assert_allclose(b1["old_logp"], b0["old_logp"], atol=1e-5)
    assert float(m1[0]["ratio_log_abs_max"]) == 0.0
    for a, b in zip(m0, m1, strict=True):
        for name in ("loss", "entropy", "grad_norm", "clip_lower", "clip_upper"):
            np.testing.assert_allclose(b[name], a[name], rtol=1e-4, atol=1e-6, err_msg=name)
    close = lambda a, b: np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
    jax.tree.map(close, (s0.params, s0.fp8_meta), (s1.params, s1.fp8_meta))


def _plain_ppo_params(cfg, tx, state, batch):
    """Reference: grad of the PPO loss through the model, optax update; no calibration code."""
    model = Transformer(TINY, cfg.recipe)

    def loss_fn(params):
        logits, _ = model.apply(
            {"params": params}, batch["tokens"], batch["positions"], batch["attn_mask"]
        )
        logp, _ = token_logprobs_and_entropy(logits, batch["tokens"], batch["response_mask"])
        loss, _ = ppo_policy_loss(
            logp,
            batch["old_logp"],
            batch["advantages"],
            batch["response_mask"],
            eps_low=cfg.rl.eps_low,
            eps_high=cfg.rl.eps_high,
            agg=cfg.rl.agg,
        )
        return loss

    grads = jax.grad(loss_fn)(state.params)
    updates, _ = tx.update(grads, state.opt_state, state.params)
    return optax.apply_updates(state.params, updates)


def test_calibration_off_is_plain_ppo():
    plain = CorrectionConfig(mode="none")
    rl = dataclasses.replace(get_preset("grpo"), kl_beta=0.0, correction=plain)
    cfg, _, state = make_setup("fp32", rl=rl)
    tx = optax.sgd(1.0)  # linear in the gradient: Adam would amplify near-zero differences
    state = create_train_state(state.params, {}, tx, rl.clip_bounds)
    batch = prepared(cfg, state)
    # perturb params so the ratio leaves 1 and clipping is active
    # and mark them as moved (one update applied in this batch): old_logp comes from the batch
    state = state.replace(
        params=jax.tree.map(lambda p: p * 1.3, state.params), batch_updates=jnp.int32(1)
    )
    expected = jax.jit(_plain_ppo_params, static_argnums=(0, 1))(cfg, tx, state, batch)
    new_state, metrics = jax.jit(make_update_step(TINY, cfg, tx))(state, batch, LATER)
    assert float(metrics["clip_frac"]) > 0
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, atol=1e-6), new_state.params, expected
    )
    assert float(new_state.clip_lower) == pytest.approx(0.8)


@pytest.mark.parametrize("recipe", ["bf16", "fp8_delayed"])
def test_non_finite_gradient_skips_update(recipe):
    cfg, tx, state = make_setup(recipe)
    batch = prepared(cfg, state)
    batch["advantages"] = batch["advantages"].copy()
    batch["advantages"][0] = np.nan
    host = lambda tree: jax.tree.map(np.asarray, tree)
    before = host((state.params, state.opt_state, state.fp8_meta))
    new_state, metrics = jax.jit(make_update_step(TINY, cfg, tx))(state, batch, FIRST)
    after = host((new_state.params, new_state.opt_state, new_state.fp8_meta))
    jax.tree.map(np.testing.assert_array_equal, after, before)  # moments and histories too
    assert float(metrics["update_skipped"]) == 1.0 and int(new_state.skipped_updates) == 1
    assert int(new_state.batch_updates) == 0  # nothing applied: still at theta_old


def test_delayed_scaling_histories_update():
    cfg, tx, state = make_setup("fp8_delayed")
    assert state.fp8_meta, "delayed scaling must create fp8_meta state"
    batch = prepared(cfg, state)
    new_state, _ = jax.jit(make_update_step(TINY, cfg, tx))(state, batch, FIRST)
    leaves = jax.tree_util.tree_leaves_with_path(new_state.fp8_meta)
    for path, hist in leaves:
        assert float(hist[0]) > 0, f"{jax.tree_util.keystr(path)} did not record an amax"


def test_ppo_updater_runs_epochs_times_minibatches():
    cfg, tx, state = make_setup("bf16")
    step = jax.jit(make_update_step(TINY, cfg, tx), donate_argnums=0)
    updater = PPOUpdater(TINY, cfg, step, epochs=2, num_minibatches=2, ref_params=state.params)
    rng = np.random.default_rng(0)
    state, metrics, probe = updater.update(state, rollout_batch(), rng, rl_step=1, probe=True)
    assert len(metrics) == 4 and int(state.update_count) == 4 and int(state.batch_updates) == 4
    assert all(np.isfinite(m["loss"]) for m in metrics)
    assert metrics[0]["ratio_log_abs_max"] == 0.0
    assert jnp.isfinite(metrics[-1]["grad_norm"])
    # bf16 trainer: the ratio probe's trainer and BF16-shadow ratios are the same numbers
    mask = probe["mask"]
    assert probe["ratio"].shape == mask.shape and np.all(probe["ratio"][~mask] == 1.0)
    np.testing.assert_allclose(probe["ratio"], probe["ratio_ref"], rtol=1e-6)
    assert np.any(np.abs(probe["ratio"][mask] - 1.0) > 1e-3)  # the updates moved the policy


@pytest.mark.parametrize("calibrate", [False, True])
def test_ratio_probe_keeps_the_batch_keys_the_step_was_compiled_for(calibrate):
    """A ratio dump must not change what `prepare` emits (regression: the probe's lazily built
    shadow made later batches carry old_logp_ref, which the sharded step was not compiled for)."""
    calib = CalibrationConfig(enabled=calibrate, period=1)
    cfg, tx, state = make_setup("fp8_block", calibration=calib)
    step = jax.jit(make_update_step(TINY, cfg, tx))
    updater = PPOUpdater(TINY, cfg, step, num_minibatches=2, ref_params=state.params)
    keys = minibatch_keys(cfg)
    rng = np.random.default_rng(0)
    state, _, probed = updater.update(state, rollout_batch(seed=0), rng, 1, probe=True)
    assert probed is not None and probed["ratio_ref"].shape == probed["ratio"].shape
    plan = updater.plan(8, rng)
    assert tuple(updater.prepare(state, rollout_batch(seed=1), plan, calibrate)[0]) == keys


def test_recompute_gap_share_counts_tokens_beyond_log_1_2():
    """At theta_old the precomputed old log-probs are checked against the step's own forward:
    the max gap and the share of valid tokens whose gap exceeds log 1.2."""
    cfg, tx, state = make_setup("bf16")
    batch = prepared(cfg, state)
    valid = np.asarray(batch["response_mask"]).astype(bool)
    old = np.array(batch["old_logp"])
    rows, cols = np.nonzero(valid)
    old[rows[:3], cols[:3]] += 0.5  # three tokens off by a ratio of e^0.5
    old[rows[3], cols[3]] += 0.1  # one within log 1.2
    step = jax.jit(make_update_step(TINY, cfg, tx))
    state, m = step(state, dict(batch, old_logp=old), FIRST)
    assert float(m["old_logp_recompute_gap_frac"]) == pytest.approx(3 / valid.sum())
    assert float(m["old_logp_recompute_gap"]) == pytest.approx(0.5, abs=1e-4)
    _, m = step(state, batch, LATER)  # theta != theta_old: no check
    assert np.isnan(m["old_logp_recompute_gap_frac"])
