"""The benchmarks' one timing helper: warm-up calls untimed, then the median or the mean of the
timed ones, each result waited on inside its clock (or only the last, when asked)."""

from __future__ import annotations

import itertools

import pytest

from benchmarks import timing


@pytest.fixture
def clock(monkeypatch):
    """perf_counter ticks 0, 1, 3, 6, 10, ... (the n-th reading is n(n+1)/2); the waits are
    recorded instead of done."""
    ticks = itertools.accumulate(itertools.count())
    monkeypatch.setattr(timing.time, "perf_counter", lambda: float(next(ticks)))
    waited = []
    monkeypatch.setattr(timing.jax, "block_until_ready", lambda x: waited.append(x) or x)
    return waited


def counting():
    calls = []
    return calls, lambda *args: calls.append(args) or len(calls)


def test_timed_returns_the_waited_result_and_its_seconds(clock):
    calls, fn = counting()
    assert timing.timed(fn, "a", "b") == (1, 1.0)  # readings 0, 1
    assert calls == [("a", "b")] and clock == [1]
    assert timing.timed(fn, wait=False) == (2, 3.0)  # readings 3, 6
    assert clock == [1]


def test_median_of_separately_timed_calls_after_the_warmup(clock):
    calls, fn = counting()
    # readings 0, 1 | 3, 6 | 10, 15 (the warm-up calls read none): 1, 3, 5 seconds
    assert timing.time_calls(fn, 7, reps=3, warmup=2) == 3.0
    assert len(calls) == 5 and all(a == (7,) for a in calls)
    assert clock == [1, 2, 3, 4, 5]  # the warm-up calls and every timed call waited on


def test_mean_is_one_clock_around_all_calls(clock):
    _, fn = counting()
    assert timing.time_calls(fn, reps=4, warmup=1, stat="mean") == 1 / 4  # readings 0, 1
    assert clock == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("kwargs", [{"reps": 0}, {"reps": 2, "stat": "min"}])
def test_refuses_what_it_does_not_measure(kwargs):
    with pytest.raises(ValueError):
        timing.time_calls(lambda: None, **kwargs)
