"""Finite-value statistics and the one definition of a run's final value."""

import math

import numpy as np
import pytest

from calclip_jax.analysis import stats


def test_finite_mean_skips_none_and_nan():
    assert stats.finite_mean([1.0, None, math.nan, 3, math.inf]) == 2.0
    assert stats.finite_mean(np.array([np.nan, 4.0])) == 4.0
    assert stats.finite_mean([]) is None and stats.finite_mean(None) is None
    assert stats.finite_mean([None, math.nan]) is None
    assert math.isnan(stats.finite_mean([None], default=math.nan))
    assert isinstance(stats.finite_mean(np.array([1, 2], np.float32)), float)


def test_finite_stat_and_last_finite():
    assert stats.finite_stat([3.0, None, 5.0, math.nan], np.max) == 5.0
    assert stats.last_finite([0.2, 0.4, None, math.nan]) == 0.4
    assert stats.last_finite([None]) is None


def test_final_value_is_the_mean_of_the_last_final_steps_steps():
    assert stats.FINAL_STEPS == 10  # results/RESULTS.md quotes "reward, last 10"
    values = list(range(1, 16))  # steps 1..15: the last 10 are 6..15
    assert stats.final_value(values) == pytest.approx(10.5)
    # a null among the last 10 steps shrinks the sample; it does not reach back to step 5
    assert stats.final_value([*values[:-1], None]) == pytest.approx(np.mean(range(6, 15)))
    assert stats.final_value([0.5, None]) == 0.5  # a short run: all its steps
    assert stats.final_value([None] * 3) is None and stats.final_value(None) is None
    assert stats.final_value(np.arange(20.0)) == pytest.approx(14.5)
