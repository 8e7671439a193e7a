"""Do two runs' bad steps coincide more than chance says? Two tests for arms that share prompts.

Arms run with one seed see the same prompts at every RL step, so a step whose garbled share
spikes in two arms at once may owe it to its prompts, or to chance.

- `spike_coincidence`, over steps: the steps where both series pass a threshold, against every
  nonzero circular shift of the second series. A shift keeps each series' own clustering (spikes
  come in runs of steps) and breaks only their alignment in time. The p-value counts the observed
  alignment among the T shifts (a randomization test's p), so it is at least 1/T: 20 steps
  cannot show anything below 0.05.
- `prompt_coincidence`, over prompts: at each step, the prompts with a bad response in both arms,
  against drawing each arm's bad prompts at random among the step's prompts (hypergeometric; the
  exact distribution of the sum over steps).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class Coincidence:
    """Observed co-occurrences against a null of unrelated series."""

    units: int  # steps (or step-prompts) both series cover
    hits: tuple[int, int]  # units each series marks
    shared: int  # units both mark
    expected: float  # mean of `shared` under the null
    p_value: float  # P(shared >= observed) under the null (NaN where nothing is marked)


def spike_coincidence(x: np.ndarray, y: np.ndarray, threshold: float) -> Coincidence:
    """Steps where both `x` and `y` exceed `threshold` (steps where either is NaN dropped),
    tested against every nonzero circular shift of `y` over the remaining steps: `expected` is
    their mean, `p_value` the share of all T shifts, the observed one included, with as many."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"two series of one length, got shapes {x.shape} and {y.shape}")
    keep = np.isfinite(x) & np.isfinite(y)
    a, b = x[keep] > threshold, y[keep] > threshold
    shared = int(np.sum(a & b))
    null = np.array([np.sum(a & np.roll(b, k)) for k in range(1, a.size)], np.float64)
    marked = a.any() and b.any() and null.size > 0
    return Coincidence(
        units=int(a.size),
        hits=(int(a.sum()), int(b.sum())),
        shared=shared,
        expected=float(null.mean()) if null.size else float("nan"),
        p_value=float((1 + np.sum(null >= shared)) / a.size) if marked else float("nan"),
    )


def hypergeometric_pmf(population: int, a: int, b: int) -> np.ndarray:
    """P(overlap = k), k = 0..min(a, b): two random subsets of sizes a and b of `population`."""
    if not 0 <= a <= population or not 0 <= b <= population:
        raise ValueError(f"subsets of sizes {a} and {b} of {population}")
    total = math.comb(population, b)
    return np.array(
        [math.comb(a, k) * math.comb(population - a, b - k) / total for k in range(min(a, b) + 1)]
    )


def prompt_coincidence(steps: Sequence[tuple[int, set[str], set[str]]]) -> Coincidence:
    """Prompts marked in both arms, summed over `steps` of (prompts at the step, the prompts one
    arm marked, the prompts the other marked), against each arm's marked prompts drawn at random
    among the step's."""
    pmf, shared, hits, units = np.ones(1), 0, [0, 0], 0
    for population, a, b in steps:
        pmf = np.convolve(pmf, hypergeometric_pmf(population, len(a), len(b)))
        shared += len(a & b)
        hits[0] += len(a)
        hits[1] += len(b)
        units += population
    expected = float(np.dot(np.arange(pmf.size), pmf))
    marked = hits[0] > 0 and hits[1] > 0
    return Coincidence(
        units=units,
        hits=(hits[0], hits[1]),
        shared=shared,
        expected=expected,
        p_value=float(pmf[shared:].sum()) if marked else float("nan"),
    )
