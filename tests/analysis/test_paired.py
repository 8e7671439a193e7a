"""Paired bootstrap over seeds x steps (calclip_jax.analysis.paired)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calclip_jax.analysis.paired import (
    Interval,
    default_block,
    mean_interval,
    paired_difference,
    ratio_difference,
    ratio_of_means,
    resample_indices,
    seed_mean_interval,
    significant,
    t_quantile,
)


def test_blocks_are_consecutive_steps_modulo_the_run_length():
    seed_idx, step_idx = resample_indices(3, 10, 50, 4, np.random.default_rng(0))
    assert seed_idx.shape == (50, 3) and step_idx.shape == (50, 3, 10)
    assert seed_idx.min() >= 0 and seed_idx.max() < 3
    steps = step_idx.reshape(50, 3, -1)
    for offset in range(0, 8, 4):  # the first two whole blocks of 4
        block = steps[..., offset : offset + 4]
        assert np.all((np.diff(block, axis=-1) % 10) == 1)


def test_interval_covers_the_true_mean_about_as_often_as_stated():
    rng = np.random.default_rng(0)
    covered = [
        not mean_interval(rng.normal(0.3, 1.0, (3, 30)), n_boot=400, seed=i).excludes(0.3)
        for i in range(300)
    ]
    # the bootstrap over 3 seeds x 30 steps is a little narrow; 90% nominal, binomial slack
    assert 0.78 <= np.mean(covered) <= 0.97


def test_blocks_widen_the_interval_of_autocorrelated_steps():
    rng = np.random.default_rng(1)
    x = np.zeros((2, 100))
    for t in range(1, 100):  # AR(1), phi = 0.9
        x[:, t] = 0.9 * x[:, t - 1] + rng.normal(size=2)
    width = lambda i: i.high - i.low
    assert width(mean_interval(x, block=10)) > 1.5 * width(mean_interval(x, block=1))


def test_paired_difference_is_the_interval_of_the_differences():
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(2, 20)), rng.normal(size=(2, 20))
    assert paired_difference(a, b) == mean_interval(a - b)
    with pytest.raises(ValueError, match="differ in shape"):
        paired_difference(a, b[:, :10])
    with pytest.raises(ValueError, match="seeds, steps"):
        mean_interval(a[0])


def test_missing_cells_and_seeds_are_skipped_and_counted():
    x = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan], [5.0, 5.0, np.nan]])
    got = mean_interval(x)
    assert got.estimate == pytest.approx((2.0 + 5.0) / 2)  # each seed weighs the same
    assert (got.seeds, got.steps) == (2, 4)
    np.testing.assert_array_equal(got.per_seed, [2.0, np.nan, 5.0])  # each seed's own mean
    assert got.fmt_per_seed(scale=10.0) == "20, n/a, 50"
    assert got.fmt_per_seed(labels=[4, 5, 6]) == "4: 2, 5: n/a, 6: 5"
    empty = mean_interval(np.full((2, 3), np.nan))
    assert math.isnan(empty.estimate) and empty.fmt() == "n/a"


def test_ratio_of_means_is_the_ratio_of_sums_and_undefined_on_zero_denominators():
    num = np.array([[0.2, 0.4], [0.1, np.nan]])
    den = np.array([[0.1, 0.1], [0.1, 0.3]])
    got = ratio_of_means(num, den)
    assert got.estimate == pytest.approx(0.7 / 0.3)
    np.testing.assert_allclose(got.per_seed, [0.6 / 0.2, 0.1 / 0.1])  # cells where both finite
    assert got.low <= got.estimate <= got.high
    assert math.isnan(ratio_of_means(num, np.zeros_like(den)).estimate)


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 4),
    st.integers(1, 12),
    st.floats(-5, 5, allow_nan=False),
    st.integers(0, 2**31 - 1),
)
def test_shifting_the_data_shifts_the_interval(seeds, steps, shift, seed):
    x = np.random.default_rng(seed).normal(size=(seeds, steps))
    base, moved = mean_interval(x, n_boot=200), mean_interval(x + shift, n_boot=200)
    for b, m in zip(
        (base.estimate, base.low, base.high), (moved.estimate, moved.low, moved.high), strict=True
    ):
        assert m == pytest.approx(b + shift, abs=1e-9)
    const = mean_interval(np.full((seeds, steps), shift), n_boot=50)
    assert const.low == pytest.approx(shift) and const.high == pytest.approx(shift)


def test_default_block_grows_with_the_cube_root():
    assert [default_block(n) for n in (1, 8, 27, 100)] == [1, 2, 3, 5]


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 3), st.integers(2, 12), st.floats(-3, 3), st.integers(0, 10**6))
def test_ratio_difference_is_exact_for_a_constant_shift(seeds, steps, shift, seed):
    """num_a = num_b + shift * den over the same cells: every resample differs by `shift`."""
    rng = np.random.default_rng(seed)
    den = rng.integers(0, 5, size=(seeds, steps)).astype(float)
    den[:, 0] += 1.0  # every seed has a token
    num_b = rng.normal(size=den.shape) * den
    got = ratio_difference((num_b + shift * den, den), (num_b, den), n_boot=200)
    assert got.estimate == pytest.approx(shift, abs=1e-9)
    assert got.low == pytest.approx(shift, abs=1e-9) and got.high == pytest.approx(shift, abs=1e-9)
    assert np.allclose(got.per_seed, shift, atol=1e-9)


def test_ratio_difference_pairs_the_groups_resamples():
    """Each estimate is the difference of the two `ratio_of_means`; resampling the cells
    together keeps what the groups share out of the interval (narrower than either alone)."""
    rng = np.random.default_rng(1)
    den_a = rng.integers(1, 4, size=(2, 60)).astype(float)
    den_b = den_a + rng.integers(0, 2, size=den_a.shape)
    row = rng.normal(scale=2.0, size=(2, 60))  # a per-cell effect both groups share
    num_a = (row + 0.5 + rng.normal(scale=0.1, size=row.shape)) * den_a
    num_b = (row + rng.normal(scale=0.1, size=row.shape)) * den_b
    got = ratio_difference((num_a, den_a), (num_b, den_b))
    a, b = ratio_of_means(num_a, den_a), ratio_of_means(num_b, den_b)
    assert got.estimate == pytest.approx(a.estimate - b.estimate)
    assert np.allclose(got.per_seed, np.subtract(a.per_seed, b.per_seed))
    assert got.low < 0.5 < got.high
    assert got.high - got.low < 0.5 * min(a.high - a.low, b.high - b.low)
    undefined = ratio_difference((num_a, 0 * den_a), (num_b, den_b))  # group a has no token
    assert math.isnan(undefined.estimate) and len(undefined.per_seed) == 2
    assert undefined.fmt_per_seed(labels=[1, 2]) == "1: n/a, 2: n/a"


def test_numbers_keep_their_digits_and_never_turn_exponential_below_a_million():
    assert significant(100.0, 2) == "100" and significant(99.5, 2) == "100"
    assert significant(1234.4, 3) == "1234" and significant(0.0123, 2) == "0.012"
    assert significant(4.44, 2) == "4.4" and significant(2e6, 3) == "2e+06"
    assert significant(math.nan, 2) == "n/a" and significant(-250.0, 2) == "-250"
    shares = Interval(0.995, 0.98, 1.0, seeds=1, steps=1, per_seed=(1.0, math.nan))
    assert shares.fmt(scale=100, digits=2) == "100 [98, 100]"  # was "1e+02 [98, 1e+02]"
    assert shares.fmt_per_seed(scale=100, digits=2) == "100, n/a"


def test_t_quantile_matches_its_closed_forms_and_falls_towards_the_normal():
    # df = 1 (Cauchy): P(|T| <= t) = 2 atan(t) / pi; df = 2: P(|T| <= t) = t / sqrt(2 + t^2)
    for level in (0.5, 0.9, 0.95):
        assert t_quantile(level, 1) == pytest.approx(math.tan(math.pi * level / 2), rel=1e-12)
        assert t_quantile(level, 2) == pytest.approx(
            level * math.sqrt(2 / (1 - level**2)), rel=1e-12
        )
    ts = [t_quantile(0.9, df) for df in range(1, 60)]
    assert all(a > b for a, b in itertools.pairwise(ts))
    assert 1.6448536 < ts[-1] < 1.68  # the normal's 95th percentile, approached from above
    with pytest.raises(ValueError, match="df"):
        t_quantile(0.9, 0)
    with pytest.raises(ValueError, match="level"):
        t_quantile(1.0, 3)


def test_seed_mean_interval_by_hand_on_three_seeds():
    """Seeds 1, 2, 3: mean 2, sd 1, two degrees of freedom, so the half-width is
    t(0.9, 2) / sqrt(3) with t(0.9, 2) = 0.9 sqrt(2 / 0.19) (the df = 2 closed form)."""
    got = seed_mean_interval([1.0, 2.0, 3.0])
    half = 0.9 * math.sqrt(2 / 0.19) / math.sqrt(3)
    assert half == pytest.approx(2.9199856 / 1.7320508, abs=1e-7)  # t table: 2.919986
    assert got.estimate == 2.0 and (got.seeds, got.steps) == (3, 3)
    assert got.low == pytest.approx(2 - half, abs=1e-12)
    assert got.high == pytest.approx(2 + half, abs=1e-12)


def test_seed_mean_interval_reads_the_bootstrap_intervals_seeds():
    rng = np.random.default_rng(3)
    diff = paired_difference(rng.normal(0.5, 1, (3, 40)), rng.normal(size=(3, 40)), n_boot=200)
    got = seed_mean_interval(diff.per_seed)
    assert got.estimate == pytest.approx(diff.estimate)  # the same mean of seed means
    assert got.per_seed == diff.per_seed
    one = seed_mean_interval([0.4, math.nan])  # a seed without a value is dropped
    assert one.estimate == 0.4 and math.isnan(one.low) and math.isnan(one.high)
    assert math.isnan(seed_mean_interval([]).estimate)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(-100, 100, allow_nan=False), min_size=2, max_size=6),
    st.floats(0.05, 0.9),
    st.floats(0.01, 0.09),
)
def test_seed_mean_interval_holds_the_mean_and_widens_with_the_level(seeds, level, step):
    low_level = seed_mean_interval(seeds, level=level)
    high_level = seed_mean_interval(seeds, level=level + step)
    mean = float(np.mean(seeds))
    assert low_level.estimate == pytest.approx(mean)
    assert low_level.low <= mean <= low_level.high
    assert high_level.low <= low_level.low + 1e-9 and high_level.high >= low_level.high - 1e-9
    assert low_level.high - mean == pytest.approx(mean - low_level.low, abs=1e-9)  # symmetric
