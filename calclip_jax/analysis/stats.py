"""Finite-value statistics of logged metrics, and what a run's "final" value is.

Logged metrics hold None (JSON null) or NaN where a step had no value (a sparse eval, a
calibration-only `_ref` metric, an empty token set); every statistic here skips them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

FINAL_STEPS = 10
"""A run's final value of a per-step metric: the mean of its finite values over the last
FINAL_STEPS logged RL steps (steps, not finite values: a null at one of them shrinks the sample,
it does not reach further back). One RL step is one noisy rollout batch; ten still describe the
end of a 60-300 step run. results/RESULTS.md and tables.md quote it as "reward, last 10"."""


def finite_values(values: Iterable[Any] | np.ndarray | None) -> np.ndarray:
    """The finite entries of `values` as float64, in order (None and NaN dropped)."""
    if values is None:
        return np.zeros(0)
    if isinstance(values, np.ndarray) and values.dtype != object:
        x = values.astype(np.float64).ravel()
    else:
        x = np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)
    return x[np.isfinite(x)]


def finite_stat(
    values: Iterable[Any] | np.ndarray | None,
    reduce: Callable[[np.ndarray], Any],
    default: float | None = None,
) -> float | None:
    """`reduce` of the finite values as a float; `default` when there is none."""
    x = finite_values(values)
    return float(reduce(x)) if x.size else default


def finite_mean(
    values: Iterable[Any] | np.ndarray | None, default: float | None = None
) -> float | None:
    """Mean of the finite values; `default` (None: JSON null) when there is none."""
    return finite_stat(values, np.mean, default)


def last_finite(
    values: Iterable[Any] | np.ndarray | None, default: float | None = None
) -> float | None:
    """The last finite value (a sparse metric such as eval_accuracy); `default` if none."""
    return finite_stat(values, lambda x: x[-1], default)


def final_value(
    values: Iterable[Any] | np.ndarray | None, default: float | None = None
) -> float | None:
    """The run's final value of a per-step metric (one value per logged step): see FINAL_STEPS."""
    if values is None:
        return default
    return finite_mean(list(values)[-FINAL_STEPS:], default)
