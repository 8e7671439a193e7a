"""The cut responses' gradient counts of one dump (analysis/cut_gradient.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calclip_jax.analysis.cut_gradient import CutCounts, cut_counts


def test_a_worked_dump():
    finished = np.array([False, False, True])
    ratio = np.array([[0.5, 0.9, 0.1], [0.5, 0.5, 0.5], [0.7, 1.2, 0.79]])
    adv = np.array([-1.0, 0.0, -0.5])
    mask = np.array([[1, 1, 0], [1, 1, 1], [1, 1, 1]])  # row 0's third token is padding
    got = cut_counts(finished, ratio, adv, mask, lower=0.8)
    assert got == CutCounts(rows=(2, 1), zero_rows=(1, 0), neg_tokens=(2, 3), clipped_tokens=(1, 2))


def test_a_row_with_any_nonzero_token_advantage_is_not_a_zero_row():
    adv = np.array([[0.0, 0.0, 0.3], [0.0, 0.0, 0.3]])  # per token; row 1's 0.3 is padding
    mask = np.array([[1, 1, 1], [1, 1, 0]])
    got = cut_counts(np.array([False, False]), np.ones((2, 3)), adv, mask, lower=0.8)
    assert got.zero_rows == (1, 0) and got.neg_tokens == (0, 0)


def test_one_flag_per_row():
    with pytest.raises(ValueError, match="one finished flag per row"):
        cut_counts(np.ones(3, bool), np.ones((2, 4)), np.ones(2), np.ones((2, 4)), 0.8)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 5), st.integers(0, 2**31 - 1))
def test_counts_match_a_row_by_row_reference(b, t, seed):
    rng = np.random.default_rng(seed)
    finished = rng.random(b) < 0.5
    ratio = np.exp(rng.normal(0, 0.5, (b, t)))
    adv = rng.choice([-1.0, 0.0, 1.0], size=b)
    mask = rng.random((b, t)) < 0.8
    lower = float(rng.uniform(0.5, 1.0))
    got = cut_counts(finished, ratio, adv, mask, lower)
    want = {k: [0, 0] for k in ("rows", "zero_rows", "neg_tokens", "clipped_tokens")}
    for i in range(b):
        side = int(finished[i])
        want["rows"][side] += 1
        want["zero_rows"][side] += int(adv[i] == 0 or not mask[i].any())
        for j in range(t):
            if mask[i, j] and adv[i] < 0:
                want["neg_tokens"][side] += 1
                want["clipped_tokens"][side] += int(ratio[i, j] < lower)
    assert got == CutCounts(**{k: tuple(v) for k, v in want.items()})
