"""Figures for notebooks and RESULTS.md; each function returns the Figure (optionally saved).

Without a display (no DISPLAY / MPLBACKEND, pyplot not yet imported) the Agg backend is selected,
so these run headless in CI; notebooks keep their inline backend.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

if (
    "matplotlib.pyplot" not in sys.modules
    and not os.environ.get("DISPLAY")
    and not os.environ.get("MPLBACKEND")
):
    matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from calclip_jax.analysis.surge import SURGE_FACTOR, SURGE_WARMUP, SURGE_WINDOW, detect_surge
from calclip_jax.reports import metrics as M
from calclip_jax.workdir.seed_names import split_seeded_name

CURVE_KEYS = ("entropy", "reward_mean", "eval_accuracy", "clip_frac_lower_neg")
# What a surge would look like on a real model: reward and accuracy fall while entropy, the
# garbled share and the response length climb (`experiments.paired_report --curves_figure`).
DYNAMICS_KEYS = (
    "reward_mean",
    "eval_accuracy",
    "entropy",
    "garbled_frac",
    "response_len_mean",
    "clip_frac_lower_neg",
)


INSIDE_LEGEND_MAX = 6  # more arms: one legend beside the panels


def seed_group(run_name: str) -> str:
    """The arm a run belongs to: its name without a `__seed<N>` suffix."""
    return split_seeded_name(run_name)[0]


def arm_colors(arms: Sequence[str]) -> dict[str, Any]:
    """A distinct colour per arm: tab10 up to 10 arms, tab20 up to 20, then tab20 + tab20b +
    tab20c (60), then evenly spaced turbo hues."""
    n = len(arms)
    if n <= 10:
        palette = [plt.get_cmap("tab10")(i) for i in range(10)]
    elif n <= 20:
        palette = [plt.get_cmap("tab20")(i) for i in range(20)]
    elif n <= 60:
        palette = [plt.get_cmap(m)(i) for m in ("tab20", "tab20b", "tab20c") for i in range(20)]
    else:
        palette = list(plt.get_cmap("turbo")(np.linspace(0.02, 0.98, n)))
    return {arm: palette[i] for i, arm in enumerate(arms)}


def finish_figure(fig: Figure, save: str | Path | None) -> Figure:
    """Tight layout, then the PNG at `save` (none when None); returns `fig`."""
    fig.tight_layout()
    if save is not None:
        fig.savefig(save, dpi=120, bbox_inches="tight")
    return fig


def _legend(fig: Figure, axes: np.ndarray, handles: list, labels: list[str]) -> None:
    """One legend entry per arm: in the first panel for a few arms, else beside the figure."""
    if not handles:
        return
    if len(handles) <= INSIDE_LEGEND_MAX:
        axes.flat[0].legend(handles, labels, fontsize=8)
    else:
        fig.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7,
                   ncol=1 + len(handles) // 30, frameon=False)  # fmt: skip


def seed_band(
    series: Sequence[tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(steps, mean, min, max) over the seeds' finite values at each step any seed logged."""
    by_step: dict[int, list[float]] = {}
    for steps, y in series:
        for step, v in zip(steps, y, strict=True):
            if np.isfinite(v):
                by_step.setdefault(int(step), []).append(float(v))
    steps = np.array(sorted(by_step), dtype=np.int64)
    vals = [np.array(by_step[s]) for s in steps]
    return (
        steps,
        np.array([v.mean() for v in vals]),
        np.array([v.min() for v in vals]),
        np.array([v.max() for v in vals]),
    )


def seeds_label(arm: str, last_steps: Sequence[int]) -> str:
    """Legend label of an arm's seeds: "<arm> (k seeds)", or where the seeds end at different
    steps, how many reach each end ("a (3 seeds to step 80, 1 to 100)"): past the first end the
    band and mean rest on fewer seeds."""
    if len(last_steps) == 1:
        return arm
    ends = sorted(set(last_steps))
    if len(ends) == 1:
        return f"{arm} ({len(last_steps)} seeds)"
    reach = [sum(last >= end for last in last_steps) for end in ends]
    parts = [f"{reach[0]} seeds to step {ends[0]}"]
    parts += [f"{n} to {end}" for n, end in zip(reach[1:], ends[1:], strict=True)]
    return f"{arm} ({', '.join(parts)})"


def plot_curves(
    runs: Mapping[str, str | Path | dict[str, np.ndarray]],
    keys: Sequence[str] = CURVE_KEYS,
    *,
    surge_k: float = SURGE_FACTOR,
    surge_warmup: int = SURGE_WARMUP,
    surge_window: int = SURGE_WINDOW,
    save: str | Path | None = None,
) -> Figure:
    """One panel per metric, one colour and one legend entry per arm over steps.

    runs: run name -> workdir or column dict (`metrics.load_columns`). Runs named
    `<arm>__seed<N>` are seeds of `<arm>` (`seed_group`): the arm's seed mean is drawn as a line
    with a min-max band, labelled by `seeds_label`. Each run's entropy surge is a dashed
    vertical line in the arm's colour (no legend entry; the entropy panel's title says so).
    Missing/NaN points are skipped, so sparse metrics (eval_accuracy) draw as lines through
    their logged steps.
    """
    groups: dict[str, list[dict[str, np.ndarray]]] = {}
    for name, run in runs.items():
        cols = run if isinstance(run, Mapping) else M.load_columns(run)
        groups.setdefault(seed_group(name), []).append(cols)
    colors = arm_colors(list(groups))
    ncols = min(2, len(keys))
    nrows = -(-len(keys) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(6 * ncols, 3.2 * nrows), squeeze=False)
    handles, labels, any_surge = [], [], False
    for arm, seeds in groups.items():
        color = colors[arm]
        ends = [int(np.max(c["step"])) if np.size(c.get("step", [])) else 0 for c in seeds]
        label = seeds_label(arm, ends)
        handle = None
        for ax, key in zip(axes.flat, keys, strict=False):
            series = [
                (c.get("step", np.array([], dtype=np.int64)), c[key]) for c in seeds if key in c
            ]
            if not series:
                continue
            steps, mean, lo, hi = seed_band(series)
            marker = "." if steps.size < 30 else None
            (line,) = ax.plot(steps, mean, color=color, marker=marker, label=label)
            handle = handle or line
            if len(series) > 1:
                ax.fill_between(steps, lo, hi, color=color, alpha=0.2, linewidth=0)
        for cols in seeds:
            if "entropy" not in cols:
                continue
            surge = detect_surge(
                cols["entropy"], cols["step"], k=surge_k, warmup=surge_warmup, window=surge_window
            )
            if surge is not None:
                any_surge = True
                for ax in list(axes.flat)[: len(keys)]:
                    ax.axvline(surge, color=color, linestyle="--", alpha=0.7, label="_surge")
        if handle is not None:
            handles.append(handle)
            labels.append(label)
    for ax, key in zip(axes.flat, keys, strict=False):
        title = f"{key} (dashed: entropy surge)" if key == "entropy" and any_surge else key
        ax.set(title=title, xlabel="step")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(keys) :]:
        ax.set_visible(False)
    _legend(fig, axes, handles, labels)
    return finish_figure(fig, save)


def _granularity(precision: Any) -> str:
    text = str(precision)
    return text[4:] if text.startswith("fp8_") else text


def plot_clip_fractions(
    rows: Sequence[Mapping[str, Any]],
    *,
    group_by: str = "train_precision",
    save: str | Path | None = None,
) -> Figure:
    """Grouped bars of clip fractions, FP8 vs the BF16 shadow, per granularity.

    Two panels: lower clip on A<0 (`clip_frac_lower_neg` vs `_ref`) and upper clip on A>0.
    rows: summary rows (`summary.summarize_sweep`); pick one variant per granularity (e.g. the
    TIS arms). Rows sharing a group (seeds) are averaged, with the std as error bar; rows without a
    `_ref` value (no shadow forward) are left out of that panel.
    """
    panels = (
        ("clip_frac_lower_neg", "lower clip, A<0"),
        ("clip_frac_upper_pos", "upper clip, A>0"),
    )
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), squeeze=False)
    for ax, (key, title) in zip(axes.flat, panels, strict=True):
        groups: dict[str, list[tuple[float, float]]] = {}
        for row in rows:
            fp8, ref = row.get(key), row.get(f"{key}_ref")
            if fp8 is None or ref is None:
                continue
            groups.setdefault(_granularity(row.get(group_by)), []).append((fp8, ref))
        names = list(groups)
        x = np.arange(len(names))
        for offset, idx, label in ((-0.2, 0, "FP8"), (0.2, 1, "BF16 shadow")):
            vals = [np.array([p[idx] for p in groups[n]]) for n in names]
            means = [v.mean() for v in vals]
            errs = [v.std(ddof=1) if v.size > 1 else 0.0 for v in vals]
            ax.bar(x + offset, means, width=0.4, yerr=errs, label=label, capsize=3)
        ax.set_xticks(x, names)
        ax.set(title=title, ylabel="fraction of tokens clipped", xlabel=group_by)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    return finish_figure(fig, save)


def plot_metric_bars(
    rows: Sequence[Mapping[str, Any]],
    metric: str = "final_reward",
    *,
    save: str | Path | None = None,
) -> Figure:
    """One bar per arm for a summary column (missing values drawn as empty slots)."""
    arms = [str(r["arm"]) for r in rows]
    values = [np.nan if r.get(metric) is None else float(r[metric]) for r in rows]
    fig, ax = plt.subplots(figsize=(max(5.0, 0.6 * len(arms) + 2), 3.8))
    ax.bar(np.arange(len(arms)), values, color="C0")
    ax.set_xticks(np.arange(len(arms)), arms, rotation=45, ha="right")
    ax.set(title=metric, ylabel=metric)
    ax.grid(axis="y", alpha=0.3)
    return finish_figure(fig, save)
