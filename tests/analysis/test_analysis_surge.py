"""Entropy surge detection on hand-made series and against a plain-loop reference."""

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from calclip_jax.analysis.surge import (
    detect_surge,
    max_rebound,
    running_min,
    surge_mask,
    trailing_mean,
)

FALL_THEN_SURGE = [2.0, 1.5, 1.0, 0.9, 0.8, 0.8, 0.9, 1.3, 0.7]


def reference_surge(entropy, k=1.5, warmup=5):
    m = math.inf
    for t, e in enumerate(entropy, start=1):
        if e is None or math.isnan(e):
            continue
        m = min(m, e)
        if t > warmup and e > k * m:
            return t
    return None


def test_surge_found_at_first_step_above_k_times_running_min():
    # running min 0.8 from step 5; step 7 (0.9) is below 1.2, step 8 (1.3) is above.
    assert detect_surge(FALL_THEN_SURGE, window=1) == 8
    assert detect_surge(FALL_THEN_SURGE, k=2.0, window=1) is None  # 1.3 < 2 * 0.8


def test_no_surge_in_falling_or_flat_entropy():
    assert detect_surge(np.linspace(3.0, 0.5, 40), window=1) is None
    assert detect_surge([1.0] * 20, window=1) is None


def test_warmup_steps_are_never_flagged_but_feed_the_minimum():
    series = [1.0, 0.5, 2.0, 0.6, 0.7, 0.7]  # step 3 is 4x the minimum, inside the warmup
    assert detect_surge(series, window=1) is None
    assert detect_surge(series, warmup=2, window=1) == 3
    # step 6 is the first step past a 5-step warmup; the minimum 0.5 comes from step 2.
    assert detect_surge([1.0, 0.5, 0.6, 0.6, 0.6, 0.76], window=1) == 6
    assert detect_surge([1.0, 0.5, 0.6, 0.6, 0.9, 0.6], window=1) is None


def test_strict_threshold_missing_values_and_step_numbers():
    assert detect_surge([1.0] * 6 + [1.5], window=1) is None  # equal to k * m is not a surge
    assert detect_surge([1.0, None, 1.0, float("nan"), 1.0, None, 1.6], window=1) == 7
    # steps given (e.g. after dedup of a resumed run): the returned value is a step number
    assert detect_surge([1.0, 1.0, 2.0], steps=[4, 6, 8], window=1) == 8
    assert detect_surge([2.0, 1.0, 2.0], steps=[1, 2, 3], window=1) is None  # step 3 within warmup


def test_running_min_skips_nan():
    np.testing.assert_array_equal(running_min([np.nan, 3.0, np.nan, 2.0, 5.0])[1:], [3, 3, 2, 2])
    assert np.isnan(running_min([np.nan, 1.0])[0])
    assert surge_mask([], window=1).shape == (0,)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.floats(0.01, 10.0)), max_size=30),
    st.floats(1.0, 3.0),
    st.integers(0, 8),
)
def test_matches_plain_loop_reference(series, k, warmup):
    assert detect_surge(series, k=k, warmup=warmup, window=1) == reference_surge(series, k, warmup)


def test_trailing_mean_skips_missing_values():
    got = trailing_mean([1.0, None, 3.0, float("nan"), 5.0], window=2)
    np.testing.assert_allclose(got, [1.0, 1.0, 3.0, 3.0, 5.0])
    assert np.isnan(trailing_mean([None, 1.0], window=1)[0])
    with pytest.raises(ValueError, match="window"):
        trailing_mean([1.0], window=0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats(0.01, 10.0)), max_size=30), st.integers(1, 12))
def test_trailing_mean_matches_plain_loop(series, window):
    got = trailing_mean(series, window)
    for t in range(len(series)):
        vals = [v for v in series[max(0, t + 1 - window) : t + 1] if v is not None]
        if vals:
            assert got[t] == pytest.approx(sum(vals) / len(vals), rel=1e-9)
        else:
            assert np.isnan(got[t])


def test_smoothing_ignores_a_one_step_spike_but_not_a_sustained_rise():
    flat = [1.0] * 30
    spike = [*flat[:20], 1.6, *flat[21:]]
    assert detect_surge(spike, window=1) == 21
    assert detect_surge(spike) is None  # the 10-step mean moves by 0.06
    rise = [*flat[:20], *[2.0] * 10]
    # the 10-step mean passes 1.5 once 6 of its 10 steps are at 2.0: step 26
    assert detect_surge(rise) == 26
    assert detect_surge(rise, window=1) == 21


def test_max_rebound_is_how_close_a_run_came():
    assert max_rebound(np.linspace(3.0, 0.5, 40)) == 1.0  # only falls
    assert max_rebound([1.0, 0.5, 0.6, 0.6, 0.6, 0.8], window=1) == pytest.approx(1.6)
    assert np.isnan(max_rebound([1.0, 0.5], window=1))  # nothing past the warmup
    rise = [1.0] * 20 + [2.0] * 10
    # the first step whose rebound exceeds k is the surge step
    assert max_rebound(rise[:26]) > 1.5 >= max_rebound(rise[:25])
    assert detect_surge(rise) == 26


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0.01, 10.0), min_size=7, max_size=30), st.floats(1.0, 3.0))
def test_rebound_above_k_iff_surge(series, k):
    rebound = max_rebound(series, window=3)
    assume(abs(rebound - k) > 1e-9)  # s > k m and s / m > k may round apart at equality
    assert (detect_surge(series, k=k, window=3) is not None) == (rebound > k)
