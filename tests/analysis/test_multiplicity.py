"""Holm's adjusted p-values (calclip_jax.analysis.multiplicity): a worked example, the
step-down definition enumerated, the bounds every adjustment keeps."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calclip_jax.analysis.multiplicity import holm

p_lists = st.lists(st.one_of(st.floats(0.0, 1.0), st.just(float("nan"))), max_size=30)


def test_a_worked_example():
    # sorted 0.01, 0.02, 0.03, 0.5 with m = 4: 0.04, 0.06, max(0.06, 0.06), max(0.06, 0.5)
    got = holm([0.5, 0.01, 0.03, 0.02])
    np.testing.assert_allclose(got, [0.5, 0.04, 0.06, 0.06])


def test_nan_stays_nan_and_does_not_count():
    got = holm([0.01, float("nan"), 0.04])
    assert np.isnan(got[1])
    np.testing.assert_allclose(got[[0, 2]], [0.02, 0.04])


def test_bad_input_is_named():
    with pytest.raises(ValueError, match=r"lie in \[0, 1\]"):
        holm([0.2, 1.5])
    with pytest.raises(ValueError, match="one p-value per test"):
        holm(np.zeros((2, 2)))


@settings(deadline=None, max_examples=200)
@given(p_lists)
def test_the_step_down_definition(p):
    got = holm(p)
    finite = [x for x in p if np.isfinite(x)]
    m = len(finite)
    ranked = sorted(finite)
    for x, g in zip(p, got, strict=True):
        if not np.isfinite(x):
            assert np.isnan(g)
            continue
        i = ranked.index(x)  # ties share the first rank's value
        want = max(min(1.0, (m - j) * ranked[j]) for j in range(i + 1))
        assert g == pytest.approx(want, rel=1e-12, abs=0)


@settings(deadline=None, max_examples=200)
@given(p_lists)
def test_adjusted_lies_between_raw_and_bonferroni_and_keeps_the_order(p):
    raw = np.asarray(p, np.float64)
    got = holm(raw)
    keep = np.isfinite(raw)
    m = int(keep.sum())
    r, g = raw[keep], got[keep]
    assert np.all(g >= r) and np.all(g <= np.minimum(1.0, m * r) + 1e-15)
    order = np.argsort(r, kind="stable")
    assert np.all(np.diff(g[order]) >= 0)
