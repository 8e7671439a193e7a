"""Paired comparisons over seeds x RL steps, with bootstrap intervals.

Arms run with the same seed see the same prompts at every RL step (the prompt stream follows the
seed), so the per-step difference between two arms removes the prompts' difficulty from the
comparison. A metric is held as an [S, T] float64 array (seeds x RL steps, NaN where a step logged
nothing). The interval resamples seeds with replacement and, inside each resampled seed, circular
moving blocks of consecutive steps (RL steps are autocorrelated: a step-wise bootstrap would be
too narrow). Each seed weighs the same, whatever its count of finite steps.

With two or three seeds the seed resampling has few outcomes (3 seeds: 10 distinct multisets), so
the bootstrap interval mostly reflects the spread of steps within seeds. `seed_mean_interval` is
the other reading: a t interval over the seeds' own estimates, each seed one draw; reports give it
beside the bootstrap wherever seeds are FEW_SEEDS or fewer.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

LEVEL = 0.9  # two-sided coverage of every interval here
N_BOOT = 4000
FEW_SEEDS = 3  # at or below it, reports give `seed_mean_interval` beside the bootstrap


def significant(value: float, digits: int) -> str:
    """`value` to `digits` significant digits, whole numbers up to 1e6 written out ("100", not
    "1e+02"); 'n/a' when not finite."""
    if not math.isfinite(value):
        return "n/a"
    text = f"{value:.{digits}g}"
    return f"{value:.0f}" if "e" in text and 1 <= abs(value) < 1e6 else text


@dataclasses.dataclass(frozen=True)
class Interval:
    """A point estimate with its bootstrap interval (NaN where the data had no finite value)."""

    estimate: float
    low: float
    high: float
    seeds: int  # seeds with at least one finite value
    steps: int  # finite (seed, step) cells
    per_seed: tuple[float, ...] = ()  # each seed's own estimate, in row order (NaN: none)

    def excludes(self, value: float) -> bool:
        """Whether `value` lies outside the interval (False when it is undefined)."""
        return bool(self.low > value or self.high < value)

    def fmt(self, scale: float = 1.0, digits: int = 3, suffix: str = "") -> str:
        """'est [low, high]' with each number times `scale` (`significant`); 'n/a' when
        undefined."""
        if not math.isfinite(self.estimate):
            return "n/a"
        lo, hi = (significant(v * scale, digits) for v in self.bounds)
        return f"{significant(self.estimate * scale, digits)}{suffix} [{lo}, {hi}]"

    def fmt_per_seed(
        self, scale: float = 1.0, digits: int = 3, labels: Sequence[object] | None = None
    ) -> str:
        """Each seed's estimate times `scale`, comma-separated ('n/a' for a seed without one),
        each after its label ("1: -3.7, 2: -4.7") when `labels` names the seeds."""
        cells = [significant(v * scale, digits) for v in self.per_seed]
        if labels is not None:
            cells = [f"{label}: {cell}" for label, cell in zip(labels, cells, strict=True)]
        return ", ".join(cells)

    @property
    def bounds(self) -> tuple[float, float]:
        return self.low, self.high


def pad_seeds(per_seed: Sequence[np.ndarray]) -> np.ndarray:
    """Each seed's 1-D values as a row of a [S, longest] float64 array, NaN-padded (cells a
    seed lacks count as missing)."""
    out = np.full((len(per_seed), max((len(x) for x in per_seed), default=0)), np.nan)
    for i, x in enumerate(per_seed):
        out[i, : len(x)] = x
    return out


def second_halves(x_ST: np.ndarray, lengths: Sequence[int]) -> np.ndarray:
    """Each row's steps after the middle of its own first `lengths[i]`, left-aligned, NaN-padded
    (`pad_seeds`): the "second half" of seeds whose runs end at different steps."""
    return pad_seeds([row[n // 2 : n] for row, n in zip(x_ST, lengths, strict=True)])


def default_block(steps: int) -> int:
    """Block length of the moving-block bootstrap: the cube root of the step count (>= 1)."""
    return max(1, round(steps ** (1 / 3)))


def resample_indices(
    seeds: int, steps: int, n_boot: int, block: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Indices [n_boot, S] of resampled seeds and [n_boot, S, T] of their resampled steps
    (circular moving blocks of `block` steps; `block` >= steps takes each seed's steps whole)."""
    seed_idx = rng.integers(0, seeds, size=(n_boot, seeds))
    if block >= steps:
        step_idx = np.broadcast_to(np.arange(steps), (n_boot, seeds, steps))
        return seed_idx, step_idx
    n_blocks = -(-steps // block)
    starts = rng.integers(0, steps, size=(n_boot, seeds, n_blocks, 1))
    step_idx = (starts + np.arange(block)) % steps
    return seed_idx, step_idx.reshape(n_boot, seeds, n_blocks * block)[..., :steps]


def _seed_means(values_ST: np.ndarray) -> np.ndarray:
    """Per-seed mean over finite steps; NaN for a seed with none."""
    finite = np.isfinite(values_ST)
    total = np.where(finite, values_ST, 0.0).sum(-1)
    count = finite.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _sample_means(values_ST: np.ndarray, seed_idx: np.ndarray, step_idx: np.ndarray) -> np.ndarray:
    """Mean over seeds of per-seed step means, for each bootstrap sample: [n_boot]."""
    picked = values_ST[seed_idx[..., None], step_idx]  # [n_boot, S, T]
    return np.nanmean(_seed_means(picked), axis=-1)


def _check(values_ST: np.ndarray, name: str) -> np.ndarray:
    x = np.asarray(values_ST, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"{name} must be [seeds, steps], got shape {x.shape}")
    return x


def _interval(
    estimate: float,
    samples: np.ndarray,
    finite_ST: np.ndarray,
    level: float,
    per_seed: np.ndarray | None = None,
) -> Interval:
    samples = samples[np.isfinite(samples)]
    tail = (1.0 - level) / 2.0
    if samples.size == 0 or not math.isfinite(estimate):
        low = high = math.nan
    else:
        low, high = (float(v) for v in np.quantile(samples, [tail, 1.0 - tail]))
    return Interval(
        estimate=estimate,
        low=low,
        high=high,
        seeds=int(finite_ST.any(-1).sum()),
        steps=int(finite_ST.sum()),
        per_seed=() if per_seed is None else tuple(float(v) for v in per_seed),
    )


def _setup(
    shape: tuple[int, ...], block: int | None, n_boot: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    seeds, steps = shape
    rng = np.random.default_rng(seed)
    return resample_indices(seeds, steps, n_boot, block or default_block(steps), rng)


def mean_interval(
    values_ST: np.ndarray,
    *,
    level: float = LEVEL,
    n_boot: int = N_BOOT,
    block: int | None = None,
    seed: int = 0,
) -> Interval:
    """Mean over seeds of each seed's mean over finite steps (`per_seed`), and its bootstrap
    interval."""
    x = _check(values_ST, "values_ST")
    finite = np.isfinite(x)
    if not finite.any():
        return _interval(math.nan, np.zeros(0), finite, level)
    per_seed = _seed_means(x)
    estimate = float(np.nanmean(per_seed))
    seed_idx, step_idx = _setup(x.shape, block, n_boot, seed)
    with warnings.catch_warnings():  # a resample may draw only seeds without a finite value
        warnings.simplefilter("ignore", RuntimeWarning)
        samples = _sample_means(x, seed_idx, step_idx)
    return _interval(estimate, samples, finite, level, per_seed)


def paired_difference(a_ST: np.ndarray, b_ST: np.ndarray, **kwargs: Any) -> Interval:
    """Mean of a - b over the (seed, step) cells where both are finite: `mean_interval` of the
    paired differences (same seeds, same steps, so the same prompts)."""
    a, b = _check(a_ST, "a_ST"), _check(b_ST, "b_ST")
    if a.shape != b.shape:
        raise ValueError(f"paired arrays differ in shape: {a.shape} vs {b.shape}")
    return mean_interval(a - b, **kwargs)


def _ratio(n: np.ndarray, d: np.ndarray, axis: tuple[int, ...] | int = (-2, -1)) -> np.ndarray:
    """sum(n) / sum(d) over `axis`; NaN where d sums to 0."""
    total_d = d.sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total_d > 0, n.sum(axis=axis) / total_d, np.nan)


def _finite_pair(num_ST: np.ndarray, den_ST: np.ndarray) -> tuple[np.ndarray, ...]:
    """(num, den, finite): both [S, T] float64, zero where either is not finite."""
    num, den = _check(num_ST, "num_ST"), _check(den_ST, "den_ST")
    if num.shape != den.shape:
        raise ValueError(f"ratio arrays differ in shape: {num.shape} vs {den.shape}")
    finite = np.isfinite(num) & np.isfinite(den)
    return np.where(finite, num, 0.0), np.where(finite, den, 0.0), finite


def ratio_of_means(
    num_ST: np.ndarray,
    den_ST: np.ndarray,
    *,
    level: float = LEVEL,
    n_boot: int = N_BOOT,
    block: int | None = None,
    seed: int = 0,
) -> Interval:
    """sum(num) / sum(den) over cells where both are finite (e.g. the FP8 clip share over the
    same run's BF16-shadow share: a multiplier), resampled as `mean_interval` resamples, and
    each seed's own ratio (`per_seed`); NaN where the denominator sums to 0."""
    num, den, finite = _finite_pair(num_ST, den_ST)
    estimate = float(_ratio(num, den))
    if not finite.any():
        return _interval(math.nan, np.zeros(0), finite, level)
    seed_idx, step_idx = _setup(num.shape, block, n_boot, seed)
    pick = (seed_idx[..., None], step_idx)
    samples = _ratio(num[pick], den[pick])
    return _interval(estimate, samples, finite, level, _ratio(num, den, axis=-1))


def ratio_difference(
    a: tuple[np.ndarray, np.ndarray],
    b: tuple[np.ndarray, np.ndarray],
    *,
    level: float = LEVEL,
    n_boot: int = N_BOOT,
    block: int | None = None,
    seed: int = 0,
) -> Interval:
    """`ratio_of_means` of `a` (num, den) minus that of `b`, both over the same [S, T] cells
    (e.g. two token groups of the same rows), resampled together: the same seeds and steps
    for both in every sample; `per_seed` holds each seed's difference."""
    (na, da, fa), (nb, db, fb) = _finite_pair(*a), _finite_pair(*b)
    if na.shape != nb.shape:
        raise ValueError(f"the two ratios' cells differ in shape: {na.shape} vs {nb.shape}")
    estimate = float(_ratio(na, da) - _ratio(nb, db))
    finite, per_seed = fa | fb, _ratio(na, da, axis=-1) - _ratio(nb, db, axis=-1)
    if not math.isfinite(estimate):
        return _interval(math.nan, np.zeros(0), finite, level, per_seed)
    seed_idx, step_idx = _setup(na.shape, block, n_boot, seed)
    pick = (seed_idx[..., None], step_idx)
    samples = _ratio(na[pick], da[pick]) - _ratio(nb[pick], db[pick])
    return _interval(estimate, samples, finite, level, per_seed)


def _t_coverage(theta: float, df: int) -> float:
    """P(|T| <= sqrt(df) tan(theta)) for Student's t with whole `df` >= 1 degrees of freedom,
    theta in [0, pi/2): the finite series of Abramowitz & Stegun 26.7.3 (odd df), 26.7.4 (even)."""
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if df % 2:  # (2/pi) (theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...)), up to cos^(df-2)
        term = total = 1.0
        for k in range(1, (df - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        series = s * math.cos(theta) * total if df > 1 else 0.0
        return 2.0 / math.pi * (theta + series)
    term = total = 1.0  # sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...), up to cos^(df-2)
    for k in range(1, df // 2):
        term *= c2 * (2 * k - 1) / (2 * k)
        total += term
    return s * total


def t_quantile(level: float, df: int) -> float:
    """The t with P(|T| <= t) = `level` for Student's t with whole `df` >= 1 degrees of freedom
    (the (1 + level) / 2 quantile), by bisection on `_t_coverage` (NumPy-free, no SciPy)."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    if df < 1 or int(df) != df:
        raise ValueError(f"df must be a whole number >= 1, got {df}")
    lo, hi = 0.0, math.pi / 2
    for _ in range(200):  # the bracket halves each time: far below float64's resolution
        mid = (lo + hi) / 2
        if _t_coverage(mid, int(df)) < level:
            lo = mid
        else:
            hi = mid
    return math.sqrt(df) * math.tan((lo + hi) / 2)


def seed_mean_interval(per_seed: Sequence[float] | np.ndarray, *, level: float = LEVEL) -> Interval:
    """The mean of the seeds' own estimates (non-finite ones dropped) and its t interval,
    mean +- t_quantile(level, n - 1) * sd / sqrt(n) over the n seeds (sd with n - 1): each seed one
    draw, the steps within it not counted. For a paired difference `per_seed` is the bootstrap
    Interval's own, so the estimate is the bootstrap's; one seed gives no interval (NaN bounds)."""
    x = np.asarray(per_seed, dtype=np.float64).ravel()
    x = x[np.isfinite(x)]
    n = int(x.size)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, seeds=0, steps=0)
    estimate = float(x.mean())
    if n == 1:
        low = high = math.nan
    else:
        half = t_quantile(level, n - 1) * float(x.std(ddof=1)) / math.sqrt(n)
        low, high = estimate - half, estimate + half
    return Interval(estimate, low, high, seeds=n, steps=n, per_seed=tuple(float(v) for v in x))
