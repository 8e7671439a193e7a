"""`calibration.shadow_every`: any arm, calibration on or off, measures the BF16 shadow's clip
shares on its own tokens at every update where theta != theta_old of every K-th RL step, beside
the trainer's; with calibration off the bounds stay static."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from train_testutil import TINY, make_setup, rollout_batch

from calclip_jax.model.shared_prompt import PromptGroups
from calclip_jax.rl.calibration import CALIB_METRICS
from calclip_jax.rl.diagnostics import SHADOW_METRICS
from calclip_jax.train import CalibrationConfig, PPOUpdater, make_update_step

STATIC = (float(np.float32(0.8)), float(np.float32(1.2)))  # grpo's, as the state holds them
VARIANTS = {
    "fused": {},
    "same_forward": {"same_forward": True},
    "micro_shared": {"micro_batches": 2, "shared_prompt": PromptGroups(2, 8)},
}


def _run(preset: str, variant: str, shadow_every: int, steps: int) -> list[list[dict]]:
    calib = CalibrationConfig(enabled=False, shadow_every=shadow_every)
    kwargs = VARIANTS[variant]
    cfg, tx, state = make_setup(preset, calibration=calib, lr=5e-2, **kwargs)
    step = jax.jit(make_update_step(TINY, cfg, tx), donate_argnums=0)
    ref = jax.tree.map(jnp.copy, state.params)  # the state is donated
    updater = PPOUpdater(TINY, cfg, step, num_minibatches=2, ref_params=ref)
    group = 2 if "shared_prompt" in kwargs else 1
    rng, per_step = np.random.default_rng(0), []
    for rl_step in range(1, steps + 1):
        batch = rollout_batch(batch=16, seed=rl_step, group=group)
        state, metrics, _ = updater.update(state, batch, rng, rl_step)
        per_step.append(metrics)
    assert (float(state.clip_lower), float(state.clip_upper)) == STATIC
    return per_step


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_shadow_without_calibration_keeps_static_bounds(variant):
    per_step = _run("fp8_tensor", variant, shadow_every=2, steps=3)
    for rl_step, metrics in enumerate(per_step, start=1):
        measured = rl_step in (1, 3)  # RL steps 1, 1 + K, ...
        first, later = metrics[0], metrics[1:]
        for name in SHADOW_METRICS:
            if measured:  # at theta_old r_ref == 1: nothing clipped, like the trainer's share
                assert first[name] == 0.0 and all(np.isfinite(m[name]) for m in later), name
            else:
                assert all(np.isnan(m[name]) for m in metrics), name
        for m in metrics:
            assert (m["clip_lower"], m["clip_upper"]) == STATIC
            assert m["calibrated"] == 0.0 and not set(CALIB_METRICS) & set(m)


def test_a_bf16_arm_measures_its_own_shares_on_the_same_tokens():
    """A BF16 trainer's shadow is the trainer itself: on the same tokens, through one forward
    program, the shadow's clip shares are the trainer's."""
    per_step = _run("bf16", "same_forward", shadow_every=1, steps=2)
    later = [m for metrics in per_step for m in metrics[1:]]
    assert any(m["clip_frac_lower_neg"] + m["clip_frac_upper_pos"] > 0 for m in later)
    for m in later:
        assert m["clip_frac_lower_neg_ref"] == m["clip_frac_lower_neg"]
        assert m["clip_frac_upper_pos_ref"] == m["clip_frac_upper_pos"]
