"""Garbled steps and prompts per pair of arms (calclip_jax.reports.garbled_coincidence), on
synthetic runs."""

from __future__ import annotations

import numpy as np
import pytest

from calclip_jax.analysis.multiplicity import holm
from calclip_jax.reports.garbled_coincidence import (
    GarbledRun,
    batch_coincidence,
    coincidence_report,
    coincidence_rows,
    pair_tests,
    step_coincidence,
)

PROMPTS = frozenset(f"p{i}" for i in range(16))


def run(share: dict[int, float], cut: dict[int, set[str]]) -> GarbledRun:
    return GarbledRun(share, {s: (PROMPTS, frozenset(c)) for s, c in cut.items()})


def test_steps_pair_over_the_steps_both_runs_logged():
    a = run({1: 0.1, 2: 0.0, 3: 0.2, 4: 0.0}, {})
    b = run({1: 0.1, 2: 0.0, 3: 0.0}, {})  # shorter: step 4 is dropped
    got = step_coincidence(a, b, 0.03)
    assert got.units == 3 and got.hits == (2, 1) and got.shared == 1
    assert got.expected == pytest.approx((2 * 1 - 1) / 2)


def test_prompts_pair_over_the_dump_steps_both_runs_hold():
    a = run({}, {5: {"p1", "p2"}, 10: {"p3"}, 15: {"p4"}})
    b = run({}, {5: {"p2"}, 10: set()})  # no dump at 15
    got = batch_coincidence(a, b)
    assert got.hits == (3, 1) and got.shared == 1 and got.units == 32
    assert got.expected == pytest.approx(2 * 1 / 16)


def test_batches_with_different_prompts_do_not_pair():
    a = run({}, {5: {"p1"}})
    other = GarbledRun({}, {5: (frozenset({"q"}), frozenset({"q"}))})
    with pytest.raises(ValueError, match="RL step 5 hold different prompts"):
        batch_coincidence(a, other)


def test_rows_cover_every_pair_of_each_seed():
    a = run({1: 0.1, 2: 0.0}, {1: {"p1"}})
    sweep = {"x": {0: a, 1: a}, "y": {0: a, 1: a}, "z": {0: a}}
    rows = coincidence_rows(pair_tests(sweep, 0.03))
    assert [r[:2] for r in rows] == [
        ["0", "`x` / `y`"],
        ["0", "`x` / `z`"],
        ["0", "`y` / `z`"],
        ["1", "`x` / `y`"],
    ]
    # steps: p 1/2 (the observed shift of two lines the spikes up, the other not); prompts:
    # p 1/16. Holm over the 8: the four 1/16 first (x 8, 7, 6, 5: 0.5), the four 1/2 (x 4..: 1)
    assert rows[0][2:] == [
        *["2", "1 / 1", "1", "0.00", "0.50", "1.00"],
        *["1 / 1", "1", "0.06", "0.06", "0.50"],
    ]
    text = coincidence_report(sweep, 0.03)
    assert "exceeds 0.03, in each arm" in text and "the table's 8 tests" in text
    assert text.count("\n| ") == 1 + len(rows)  # the header, then one line per row


def test_holm_takes_both_tests_of_every_row_as_one_family():
    quiet = run({s: 0.0 for s in range(1, 9)}, {1: set()})
    spiky = run({s: 0.1 * (s % 2) for s in range(1, 9)}, {1: {"p1", "p2"}})
    sweep = {"x": {0: spiky}, "y": {0: spiky}, "z": {0: quiet}}
    tests = pair_tests(sweep, 0.03)
    raw = [c.p_value for *_, steps, prompts in tests for c in (steps, prompts)]
    want = holm(raw)
    got = [r[i] for r in coincidence_rows(tests) for i in (7, 12)]
    assert got == ["n/a" if np.isnan(w) else f"{w:.2f}" for w in want]
    assert sum(np.isfinite(raw)) == 2  # `z` marks nothing: its tests have no p and no count
