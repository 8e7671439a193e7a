"""Gradient accumulation (`train.micro_batches`): the split, float32 equality with the
whole-minibatch update, the ratio at theta_old under FP8 current scaling, the memory saved."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from train_testutil import TINY, make_setup, one_rl_step_sgd, rollout_batch

from calclip_jax.train import make_update_step
from calclip_jax.train.micro_batches import check_split, merge, split
from calclip_jax.train.update_step import update_flags

EPS32 = float(np.finfo(np.float32).eps)


@settings(deadline=None, max_examples=30)
@given(
    groups_per_micro=st.integers(1, 4),
    micro=st.integers(1, 4),
    group=st.integers(1, 3),
    width=st.integers(1, 3),
)
def test_split_takes_whole_strided_groups_and_merge_inverts_it(
    groups_per_micro, micro, group, width
):
    rows = groups_per_micro * micro * group
    x = np.arange(rows * width).reshape(rows, width)
    parts = np.asarray(split(x, micro, group))
    assert parts.shape == (micro, rows // micro, width)
    for i, part in enumerate(parts):
        group_ids = part[:, 0] // width // group
        # whole groups, in order, and exactly the groups i, i + micro, i + 2 micro, ...
        wanted = np.repeat(np.arange(i, rows // group, micro), group)
        np.testing.assert_array_equal(group_ids, wanted)
    np.testing.assert_array_equal(np.asarray(merge(parts, group)), x)


def test_split_names_a_misfit():
    with pytest.raises(ValueError, match="12 rows do not split into 2 micro-batches of whole"):
        check_split(12, 2, group_size=4)


@pytest.mark.parametrize("shared", [False, True])
def test_float32_micro_batches_give_the_whole_minibatch_update(shared):
    """fp32, calibrating, KL on: 2 and 4 micro-batches move every parameter as the whole
    minibatch does, to float32 summation rounding of the gradient."""
    before, whole, m_whole = one_rl_step_sgd("fp32", 1, lr=1.0, shared=shared)
    for micro in (2, 4):
        _, parts, m_parts = one_rl_step_sgd("fp32", micro, lr=1.0, shared=shared)
        leaves = (jax.tree.leaves(t) for t in (whole, parts, before))
        for w, p, b in zip(*leaves, strict=True):
            grad_scale = np.max(np.abs(w - b)) + np.finfo(np.float32).tiny
            # each gradient entry sums 16 rows x 12 positions of terms (a float32 sum in
            # another order: a few eps of its scale), then leaves parameters of order 1
            bound = 16 * EPS32 * (grad_scale + np.max(np.abs(b)))
            print(f"micro {micro}: max |diff| / bound = {np.max(np.abs(p - w)) / bound:.3f}")
            np.testing.assert_array_less(np.abs(p - w), bound)
        for a, c in zip(m_whole, m_parts, strict=True):
            for key in ("loss", "grad_norm", "clip_frac", "ratio_log_abs_max", "calib_lower"):
                if key in a and np.isfinite(a[key]):
                    assert c[key] == pytest.approx(a[key], rel=1e-4, abs=1e-6), key


@pytest.mark.parametrize("preset", ["fp8_tensor", "bf16"])
def test_ratio_stays_one_at_theta_old_with_micro_batches(preset):
    """Learning rate 0: every update of the batch is at theta_old; old log-probs were computed
    under the same micro-batch composition, so per-tensor FP8 sees the same amaxes."""
    _, _, metrics = one_rl_step_sgd(preset, 2, lr=0.0)
    assert metrics[0]["ratio_log_abs_max"] == 0.0
    for m in metrics[1:]:  # another program (the update's), same inputs and composition
        assert m["ratio_log_abs_max"] < 1e-5, m["ratio_log_abs_max"]


def test_per_update_delayed_scales_are_refused():
    with pytest.raises(ValueError, match="delayed_scales='update'"):
        make_setup("fp8_delayed", micro_batches=2, delayed_scales="update")


def _update_temp_bytes(micro: int) -> int:
    model = dataclasses.replace(TINY, d_model=64, d_ff=256, n_layers=2)
    cfg, tx, state = make_setup("bf16", micro_batches=micro, model=model)
    batch = rollout_batch(batch=32, prompt=16, response=48, seed=0)
    batch["old_logp"] = batch["ref_logp"] = np.zeros_like(batch["rollout_logp"])
    step = jax.jit(make_update_step(model, cfg, tx))
    compiled = step.lower(state, batch, update_flags(True, False)).compile()
    return compiled.memory_analysis().temp_size_in_bytes


def test_micro_batches_shrink_the_compiled_working_set():
    whole, quarter = _update_temp_bytes(1), _update_temp_bytes(4)
    print(f"temp bytes: whole {whole}, 4 micro-batches {quarter} ({quarter / whole:.2f}x)")
    assert quarter < 0.5 * whole
