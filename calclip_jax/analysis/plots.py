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

from calclip_jax.analysis import metrics as M
from calclip_jax.analysis.surge import SURGE_FACTOR, SURGE_WARMUP, SURGE_WINDOW, detect_surge

CURVE_KEYS = ("entropy", "reward_mean", "eval_accuracy", "clip_frac_lower_neg")


def _finish(fig: Figure, save: str | Path | None) -> Figure:
    fig.tight_layout()
    if save is not None:
        fig.savefig(save, dpi=120)
    return fig


def plot_curves(
    runs: Mapping[str, str | Path | dict[str, np.ndarray]],
    keys: Sequence[str] = CURVE_KEYS,
    *,
    surge_k: float = SURGE_FACTOR,
    surge_warmup: int = SURGE_WARMUP,
    surge_window: int = SURGE_WINDOW,
    save: str | Path | None = None,
) -> Figure:
    """One panel per metric, one line per arm over steps; each arm's entropy surge is a dashed
    vertical line (label "surge@t") in every panel.

    runs: arm name -> workdir or column dict (`metrics.load_columns`). Missing/NaN points are
    skipped, so sparse metrics (eval_accuracy) draw as lines through their logged steps.
    """
    ncols = min(2, len(keys))
    nrows = -(-len(keys) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(6 * ncols, 3.2 * nrows), squeeze=False)
    for i, (arm, run) in enumerate(runs.items()):
        cols = run if isinstance(run, Mapping) else M.load_columns(run)
        steps = cols.get("step", np.array([], dtype=np.int64))
        color = f"C{i % 10}"
        surge = None
        if "entropy" in cols:
            surge = detect_surge(
                cols["entropy"], steps, k=surge_k, warmup=surge_warmup, window=surge_window
            )
        for ax, key in zip(axes.flat, keys, strict=False):
            y = cols.get(key)
            if y is not None:
                ok = np.isfinite(y)
                ax.plot(
                    steps[ok], y[ok], color=color, marker="." if ok.sum() < 30 else None, label=arm
                )
            if surge is not None:
                ax.axvline(
                    surge, color=color, linestyle="--", alpha=0.7, label=f"{arm} surge@{surge}"
                )
    for ax, key in zip(axes.flat, keys, strict=False):
        ax.set(title=key, xlabel="step")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(keys) :]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=8)
    return _finish(fig, save)


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
    return _finish(fig, save)


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
    return _finish(fig, save)
