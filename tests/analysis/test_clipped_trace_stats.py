"""The clipped-token trace's statistics (analysis/clipped_trace.py): groups and mean shifts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calclip_jax.analysis.clipped_trace import (
    CLIPPED,
    GROUPS,
    POSITIVE,
    UNCLIPPED,
    group_shift,
    group_shifts,
    shadow_after,
    token_groups,
)


def test_groups_split_valid_tokens_by_sign_and_the_lower_bound():
    ratio = np.array([[0.5, 0.79, 0.8, 0.5], [0.5, 1.0, 0.3, 2.0]])
    adv = np.array([[-1.0], [1.0]])
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 1]])
    g = token_groups(ratio, adv, mask, lower=0.8)
    np.testing.assert_array_equal(g[CLIPPED], [[1, 1, 0, 0], [0, 0, 0, 0]])  # r < 0.8, masked out
    np.testing.assert_array_equal(g[UNCLIPPED], [[0, 0, 1, 0], [0, 0, 0, 0]])
    np.testing.assert_array_equal(g[POSITIVE], [[0, 0, 0, 0], [1, 1, 0, 1]])
    none = token_groups(ratio, np.zeros((2, 1)), mask, lower=0.8)  # A = 0: in no group
    assert not any(sel.any() for sel in none.values())


def test_a_planted_shift_is_recovered_and_an_empty_group_is_undefined():
    rng = np.random.default_rng(0)
    b, t = 64, 12
    ratio = np.exp(rng.normal(0.0, 0.25, (b, t)))
    adv = np.where(np.arange(b) % 2 == 0, -1.0, 1.0)[:, None]
    mask = np.ones((b, t), bool)
    clipped = (adv < 0) & (ratio < 0.8)
    dlogp = rng.normal(0.0, 0.05, (b, t)) + 0.5 * clipped
    dlogp[0, 0] = np.nan  # a non-finite token is left out, not its row
    shifts = {g.group: g for g in group_shifts(dlogp, ratio, adv, mask, 0.8, n_boot=500)}
    assert list(shifts) == list(GROUPS)
    hit = shifts[CLIPPED]
    assert hit.tokens == clipped.sum() - clipped[0, 0] and hit.tokens > 50
    assert abs(hit.shift.estimate - 0.5) < 0.02 and hit.shift.low < 0.5 < hit.shift.high
    assert hit.shift.excludes(0.0) and hit.shift.steps == b
    for other in (UNCLIPPED, POSITIVE):
        assert shifts[other].shift.low < 0.0 < shifts[other].shift.high
        assert abs(shifts[other].shift.estimate) < 0.02
    # `after` takes out step s's own move, log r: the planted shift is what came after it
    for g in shifts.values():
        sel = token_groups(ratio, adv, mask, 0.8)[g.group] & np.isfinite(dlogp)
        moved = np.log(ratio)[sel].mean()
        assert g.after.estimate == pytest.approx(g.shift.estimate - moved, abs=1e-9)
    empty = group_shift("none", dlogp, np.log(ratio), np.zeros((b, t), bool), n_boot=50)
    assert empty.tokens == 0 and math.isnan(empty.shift.estimate) and empty.shift.fmt() == "n/a"
    assert math.isnan(empty.after.estimate)


def test_the_shadows_change_after_step_s_is_read_against_its_own_ratio():
    """shadow_after = logp_ref_t - (old_ref + log r_ref); a gain planted there on the clipped
    tokens is found, while the trainer's `after` (no planted gain) stays at 0."""
    rng = np.random.default_rng(2)
    b, t = 64, 10
    ratio = np.exp(rng.normal(0.0, 0.25, (b, t)))
    ratio_ref = np.exp(rng.normal(0.0, 0.02, (b, t)))
    adv = np.where(np.arange(b) % 2 == 0, -1.0, 1.0)[:, None]
    mask = np.ones((b, t), bool)
    clipped = token_groups(ratio, adv, mask, 0.8)[CLIPPED]
    old_ref = rng.uniform(-3.0, -0.1, (b, t))
    logp_ref_t = old_ref + np.log(ratio_ref) + 0.3 * clipped
    moved = shadow_after(logp_ref_t, old_ref, ratio_ref)
    np.testing.assert_allclose(moved, 0.3 * clipped, atol=1e-12)
    shifts = group_shifts(np.log(ratio), ratio, adv, mask, 0.8, n_boot=200, shadow_after_BT=moved)
    by = {g.group: g for g in shifts}
    assert by[CLIPPED].shadow_after.estimate == pytest.approx(0.3)
    assert by[UNCLIPPED].shadow_after.estimate == pytest.approx(0.0, abs=1e-12)
    assert all(abs(g.after.estimate) < 1e-12 for g in shifts)  # trainer: nothing after step s
    untraced = group_shifts(np.log(ratio), ratio, adv, mask, 0.8, n_boot=50)
    assert all(math.isnan(g.shadow_after.estimate) for g in untraced)
