"""Paired tables of a seeded sweep: each arm against a baseline arm, and FP8 against its own shadow.

    <sweep>/<arm>__seed<k>/   one run per arm and seed (sweeps.arms); a folder without the
                              suffix counts as seed 0

Arms of one seed share the prompts of every RL step, so "arm - baseline" is taken per (seed, step)
and its interval comes from `analysis.paired` (seeds and blocks of steps resampled); with
FEW_SEEDS seeds or fewer the t interval over the seeds' own means (`seed_mean_interval`) stands
beside it, since a few seeds resample coarsely. Each seed counts every RL step both arms of it
hold, so a seed cut short does not cut the others; a "second half" is each seed's own. The
multiplier "FP8 clip share / BF16-shadow clip share" divides metrics of one run, on its own tokens.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from calclip_jax.analysis.paired import (
    FEW_SEEDS,
    Interval,
    mean_interval,
    paired_difference,
    ratio_of_means,
    second_halves,
    seed_mean_interval,
)
from calclip_jax.reports.metrics import load_columns
from calclip_jax.workdir.run_record import find_arms
from calclip_jax.workdir.seed_names import split_seeded_name

Runs = dict[str, dict[int, dict[str, np.ndarray]]]  # arm -> seed -> metric columns


@dataclasses.dataclass(frozen=True)
class Metric:
    """A logged metric as a table row: its label, key, the steps it is read over, its scale."""

    label: str
    key: str
    second_half: bool = False  # only RL steps after the middle of the run
    percent: bool = False

    @property
    def scale(self) -> float:
        """Table units per logged unit (points for shares)."""
        return 100.0 if self.percent else 1.0


PAIRED_METRICS = (
    Metric("reward (2nd half)", "reward_mean", second_half=True, percent=True),
    Metric("eval accuracy (2nd half)", "eval_accuracy", second_half=True, percent=True),
    Metric("entropy", "entropy"),
    Metric("garbled share", "garbled_frac", percent=True),
    Metric("working: column sums true", "working_sums_true", percent=True),  # worked_addition
    Metric("working as demonstrated", "working_exact", percent=True),
    Metric("mismatch k3", "mismatch_k3"),
    Metric("gradient norm", "grad_norm"),
)

# label, the trainer's clip share, the same run's BF16-shadow share of the same tokens
SHADOW_PAIRS = (
    ("A<0 below the lower bound", "clip_frac_lower_neg", "clip_frac_lower_neg_ref"),
    ("A>0 above the upper bound", "clip_frac_upper_pos", "clip_frac_upper_pos_ref"),
)

# label, metric, percent: the bounds a calibrating arm used and how often they hit their limits
BOUND_METRICS = (
    ("lower bound in use", "clip_lower", False),
    ("upper bound in use", "clip_upper", False),
    ("calibrations floored (lower_min)", "calib_lower_floored", True),
    ("calibrations capped (upper_max)", "calib_upper_capped", True),
)
FLOOR_AND_CAP = "RL steps on the floor and the cap"  # bound_rows: the last calibration hit both


def carry_forward(x_ST: np.ndarray, ends: Sequence[int]) -> np.ndarray:
    """Each row's last finite value carried to the NaN steps after it, through the row's own end
    (`ends`, one per row; NaN before a row's first value and after its end): what a value logged
    only where a calibration ran says about the steps that ran on that calibration."""
    out = np.array(x_ST, dtype=np.float64)
    for row, end in zip(out, ends, strict=True):
        for t in range(1, min(end, row.size)):
            if np.isnan(row[t]):
                row[t] = row[t - 1]
        row[end:] = np.nan
    return out


def load_seeded_runs(sweep_dir: str | Path, last_step: int | None = None) -> Runs:
    """Every run under `sweep_dir`, grouped by arm and seed, each through `last_step`."""
    runs: Runs = {}
    for name, path in find_arms(sweep_dir).items():
        arm, seed = split_seeded_name(name)
        runs.setdefault(arm, {})[seed or 0] = load_columns(path, last_step)
    return runs


def by_run_name(runs: Runs) -> dict[str, Mapping[str, np.ndarray]]:
    """`load_seeded_runs` undone: `<arm>__seed<k>` -> that run's columns."""
    return {
        f"{arm}__seed{seed}": cols for arm, seeds in runs.items() for seed, cols in seeds.items()
    }


def step_matrix(
    by_seed: Mapping[int, Mapping[str, np.ndarray]],
    seeds: Sequence[int],
    key: str,
    ends: int | Sequence[int],
) -> np.ndarray:
    """[len(seeds), longest end] of metric `key` at RL steps 1..end, `ends` one per seed or one
    for all (NaN where not logged and after a seed's end)."""
    ends = [ends] * len(seeds) if isinstance(ends, int) else list(ends)
    out = np.full((len(seeds), max(ends, default=0)), np.nan)
    for row, (seed, end) in enumerate(zip(seeds, ends, strict=True)):
        cols = by_seed[seed]
        if key not in cols or "step" not in cols:
            continue
        step = cols["step"]
        keep = (step >= 1) & (step <= end)
        values = cols[key]
        if values.dtype == object:
            continue
        out[row, step[keep] - 1] = values[keep]
    return out


def run_ends(by_seed: Mapping[int, Mapping[str, np.ndarray]], seeds: Sequence[int]) -> list[int]:
    """Each seed's last RL step, in `seeds` order (0 without metrics)."""
    return [
        int(c["step"].max()) if (c := by_seed[s]).get("step", np.zeros(0)).size else 0
        for s in seeds
    ]


def _window(x: np.ndarray, ends: Sequence[int], metric: Metric) -> np.ndarray:
    """x itself, or each seed's second half (steps after its own middle) left-aligned."""
    if not metric.second_half:
        return x
    return second_halves(x, ends)


def steps_label(ends: Sequence[int]) -> str:
    """The seeds' run lengths: one number when they agree, else each seed's ("100/80")."""
    return str(ends[0]) if len(set(ends)) == 1 else "/".join(map(str, ends))


def _cell(interval: Interval, metric: Metric) -> str:
    return interval.fmt(scale=metric.scale, suffix="")


def seed_mean_cell(interval: Interval, scale: float = 1.0, digits: int = 3) -> str:
    """`seed_mean_interval` of `interval`'s per-seed estimates as 'est [low, high]' (times
    `scale`) where it has 2..FEW_SEEDS seeds; 'one seed: none' for one; '' above FEW_SEEDS (the
    bootstrap's seed resampling is then fine enough)."""
    got = seed_mean_interval(interval.per_seed)
    if got.seeds > FEW_SEEDS or got.seeds == 0:
        return ""
    if got.seeds == 1:
        return "one seed: none"
    return got.fmt(scale=scale, digits=digits)


def shared_seeds(runs: Runs, arm: str, baseline: str) -> list[int]:
    """The seeds both arms ran, in order: what a paired difference is taken over."""
    return sorted(set(runs[arm]) & set(runs[baseline]))


def paired_intervals(
    runs: Runs, baseline: str, **boot: Any
) -> dict[tuple[str, Metric], tuple[Interval, list[int]]]:
    """(arm, metric) -> (arm - baseline over shared seeds and steps, each shared seed's paired
    run length), for every other arm and every logged metric of PAIRED_METRICS."""
    out = {}
    for arm in sorted(set(runs) - {baseline}):
        seeds = shared_seeds(runs, arm, baseline)
        if not seeds:
            continue
        ends = list(map(min, run_ends(runs[arm], seeds), run_ends(runs[baseline], seeds)))
        for metric in PAIRED_METRICS:
            a = _window(step_matrix(runs[arm], seeds, metric.key, ends), ends, metric)
            b = _window(step_matrix(runs[baseline], seeds, metric.key, ends), ends, metric)
            got = paired_difference(a, b, **boot)
            if got.steps:
                out[arm, metric] = got, ends
    return out


def paired_rows(runs: Runs, baseline: str, **boot: Any) -> list[list[str]]:
    """Rows "arm, metric, arm - baseline [90% bootstrap interval], the same over the seeds' means
    [90% t interval] (`seed_mean_cell`), each seed's mean difference, seeds x steps (the paired
    values the interval rests on)" for every other arm: a metric logged at few steps (greedy
    evaluations) shows how few."""
    return [
        [
            arm,
            metric.label,
            _cell(got, metric),
            seed_mean_cell(got, metric.scale),
            got.fmt_per_seed(scale=metric.scale, labels=shared_seeds(runs, arm, baseline)),
            f"{got.seeds} x {steps_label(ends)} ({got.steps})",
        ]
        for (arm, metric), (got, ends) in paired_intervals(runs, baseline, **boot).items()
    ]


def shadow_rows(runs: Runs, **boot: Any) -> list[list[str]]:
    """Rows "arm, sign, FP8 share, shadow share, multiplier, each seed's multiplier" for arms
    that logged a shadow."""
    rows = []
    for arm in sorted(runs):
        seeds = sorted(runs[arm])
        ends = run_ends(runs[arm], seeds)
        for label, key, ref_key in SHADOW_PAIRS:
            trainer = step_matrix(runs[arm], seeds, key, ends)
            shadow = step_matrix(runs[arm], seeds, ref_key, ends)
            both = np.isfinite(trainer) & np.isfinite(shadow)
            if not both.any():
                continue
            trainer, shadow = np.where(both, trainer, np.nan), np.where(both, shadow, np.nan)
            multiplier = ratio_of_means(trainer, shadow, **boot)
            rows.append(
                [
                    arm,
                    label,
                    mean_interval(trainer, **boot).fmt(scale=100.0),
                    mean_interval(shadow, **boot).fmt(scale=100.0),
                    multiplier.fmt(suffix="x"),
                    multiplier.fmt_per_seed(labels=seeds),
                ]
            )
    return rows


def bound_rows(runs: Runs, **boot: Any) -> list[list[str]]:
    """Rows "arm, quantity, mean [90%]" for arms that calibrated: the clip bounds in use over
    RL steps, the share of calibrations whose lower bound sat on its floor or whose upper bound
    sat on its cap (each logged where a calibration ran), and the share of RL steps that ran on
    a calibration that hit both (FLOOR_AND_CAP: the widest clip the calibration allows)."""
    rows = []
    for arm in sorted(runs):
        seeds = sorted(runs[arm])
        ends = run_ends(runs[arm], seeds)
        if not np.isfinite(step_matrix(runs[arm], seeds, "calib_lower_floored", ends)).any():
            continue
        for label, key, percent in BOUND_METRICS:
            x = step_matrix(runs[arm], seeds, key, ends)
            if np.isfinite(x).any():
                cell = mean_interval(x, **boot).fmt(scale=100.0 if percent else 1.0)
                rows.append([arm, label + (" %" if percent else ""), cell])
        floored, capped = (
            step_matrix(runs[arm], seeds, key, ends)
            for key in ("calib_lower_floored", "calib_upper_capped")
        )
        both = np.where(np.isfinite(floored) & np.isfinite(capped), floored * capped, np.nan)
        on_both = mean_interval(carry_forward(both, ends), **boot)
        rows.append([arm, FLOOR_AND_CAP + " %", on_both.fmt(scale=100.0)])
    return rows


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def paired_report(runs: Runs, baseline: str, **boot: Any) -> str:
    """Both tables as Markdown, with what the intervals are."""
    if baseline not in runs:
        raise ValueError(f"baseline arm {baseline!r} not among the runs: {sorted(runs)}")
    return "\n\n".join(
        [
            f"### Paired against `{baseline}` (same seeds, same RL steps, same prompts)",
            "Mean of arm - baseline per (seed, step); percentages in points; 90% bootstrap"
            " interval over seeds and blocks of steps; beside it, with"
            f" {FEW_SEEDS} seeds or fewer, the 90% t interval over the seeds' own means (each seed"
            " one draw: wider, and none for one seed); then each seed's own mean (with a few"
            " seeds, read these before the interval). The last column counts the paired values the"
            " interval rests on: a metric logged at few steps (greedy evaluations) has few.",
            markdown_table(
                [
                    "arm",
                    "metric",
                    "arm - baseline [90%]",
                    "over seed means [90% t]",
                    "per seed",
                    "seeds x steps (values)",
                ],
                paired_rows(runs, baseline, **boot),
            ),
            "### Clip shares against the same run's BF16 shadow (same tokens)",
            markdown_table(
                [
                    "arm",
                    "tokens",
                    "trainer share % [90%]",
                    "shadow share % [90%]",
                    "trainer / shadow",
                    "per seed",
                ],
                shadow_rows(runs, **boot),
            ),
            "### Calibrated bounds (arms that calibrate; shares of the calibrations made)",
            markdown_table(["arm", "quantity", "mean [90%]"], bound_rows(runs, **boot)),
        ]
    )
