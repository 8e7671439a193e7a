"""Coincidence tests (calclip_jax.analysis.coincidence): the circular-shift null's exact mean,
the hypergeometric against scipy and against enumerating subsets, p-values that move the right
way."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from calclip_jax.analysis.coincidence import (
    hypergeometric_pmf,
    prompt_coincidence,
    spike_coincidence,
)

series = st.lists(st.floats(0.0, 1.0), min_size=2, max_size=40)


@settings(deadline=None, max_examples=60)
@given(series, st.randoms(use_true_random=False))
def test_the_shift_null_mean_is_the_off_diagonal_mean(x, rnd):
    y = list(x)
    rnd.shuffle(y)
    a, b = np.array(x) > 0.5, np.array(y) > 0.5
    got = spike_coincidence(np.array(x), np.array(y), 0.5)
    # Over all T shifts, each pair of steps meets once: the shifts' total is |a| |b|.
    assert got.units == len(x) and got.hits == (a.sum(), b.sum())
    assert got.shared == int(np.sum(a & b))
    assert got.expected == pytest.approx((a.sum() * b.sum() - got.shared) / (len(x) - 1))
    if a.any() and b.any():
        # the observed alignment is one of the T shifts: p >= 1/T, and = 1/T where no other
        # shift lines up as many spikes
        others = [np.sum(a & np.roll(b, k)) for k in range(1, len(x))]
        assert got.p_value == pytest.approx((1 + sum(o >= got.shared for o in others)) / len(x))
        assert 1.0 / len(x) <= got.p_value <= 1.0
    else:
        assert np.isnan(got.p_value)


def test_aligned_sparse_spikes_are_unlikely_and_misaligned_ones_are_not():
    x = np.zeros(100)
    x[[10, 40, 77]] = 0.1
    aligned = spike_coincidence(x, x, 0.03)
    assert aligned.shared == 3 and aligned.p_value == 0.01  # no other shift of 100 aligns them
    assert aligned.shared > 30 * aligned.expected
    apart = spike_coincidence(x, np.roll(x, 5), 0.03)
    assert apart.shared == 0 and apart.p_value == 1.0


def test_steps_missing_in_either_series_are_dropped_and_shapes_checked():
    x = np.array([0.1, np.nan, 0.0, 0.2, 0.0])
    y = np.array([0.1, 0.5, np.nan, 0.0, 0.0])
    got = spike_coincidence(x, y, 0.05)
    assert got.units == 3 and got.hits == (2, 1) and got.shared == 1
    with pytest.raises(ValueError, match="one length"):
        spike_coincidence(x, y[:4], 0.05)


@given(
    st.integers(1, 30).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(0, n))
    )
)
def test_hypergeometric_matches_scipy(nab):
    n, a, b = nab
    pmf = hypergeometric_pmf(n, a, b)
    k = np.arange(pmf.size)
    np.testing.assert_allclose(pmf, scipy.stats.hypergeom(n, a, b).pmf(k), atol=1e-12)
    assert pmf.sum() == pytest.approx(1.0) and np.dot(k, pmf) == pytest.approx(a * b / n)


def test_hypergeometric_rejects_subsets_larger_than_the_population():
    with pytest.raises(ValueError, match="sizes 5 and 2 of 4"):
        hypergeometric_pmf(4, 5, 2)


def test_prompt_p_value_is_the_enumerated_tail():
    """Two steps of 5 and 4 prompts: the exact tail equals counting every pair of subsets."""
    steps = [(5, {"a", "b"}, {"b", "c", "d"}), (4, {"x"}, {"x", "y"})]
    got = prompt_coincidence(steps)
    assert got.shared == 2 and got.hits == (3, 5) and got.units == 9
    assert got.expected == pytest.approx(2 * 3 / 5 + 1 * 2 / 4)
    counts = []
    for a1, b1, a2, b2 in itertools.product(
        itertools.combinations(range(5), 2),
        itertools.combinations(range(5), 3),
        itertools.combinations(range(4), 1),
        itertools.combinations(range(4), 2),
    ):
        counts.append(len(set(a1) & set(b1)) + len(set(a2) & set(b2)))
    assert got.p_value == pytest.approx(np.mean(np.array(counts) >= 2))


def test_no_cut_prompt_in_one_arm_gives_no_p_value():
    got = prompt_coincidence([(16, set(), {"a"})])
    assert got.shared == 0 and got.expected == 0.0 and np.isnan(got.p_value)
