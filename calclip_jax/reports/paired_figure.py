"""A forest plot of a seeded sweep's paired differences: one panel per metric, one row per arm."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from calclip_jax.reports.paired_arms import PAIRED_METRICS, Runs, paired_intervals
from calclip_jax.reports.plots import arm_colors


def paired_forest(runs: Runs, baseline: str, save: str | Path | None = None, **boot: Any) -> Figure:
    """Each arm's mean difference to `baseline` with its 90% interval, a zero line per panel."""
    got = paired_intervals(runs, baseline, **boot)
    arms = sorted({arm for arm, _ in got})
    metrics = [m for m in PAIRED_METRICS if any((a, m) in got for a in arms)]
    colors = arm_colors(arms)
    ncols = min(3, max(len(metrics), 1))
    nrows = -(-max(len(metrics), 1) // ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(4.2 * ncols, 0.45 * len(arms) * nrows + 1.4), squeeze=False
    )
    for ax, metric in zip(axes.flat, metrics, strict=False):
        scale = 100.0 if metric.percent else 1.0
        for row, arm in enumerate(arms):
            if (arm, metric) not in got:
                continue
            iv = got[arm, metric][0]
            ax.errorbar(
                iv.estimate * scale,
                row,
                xerr=[[(iv.estimate - iv.low) * scale], [(iv.high - iv.estimate) * scale]],
                fmt="o",
                color=colors[arm],
                capsize=3,
            )
        ax.axvline(0.0, color="grey", linewidth=0.8)
        ax.set_yticks(range(len(arms)), arms if ax in axes[:, 0] else [""] * len(arms))
        ax.set_ylim(-0.6, len(arms) - 0.4)
        ax.invert_yaxis()
        ax.set_title(f"{metric.label}{' (points)' if metric.percent else ''}", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    for ax in list(axes.flat)[len(metrics) :]:
        ax.set_visible(False)
    fig.suptitle(f"arm - {baseline}, paired per seed and RL step (90% bootstrap)", fontsize=10)
    fig.tight_layout()
    if save is not None:
        fig.savefig(save, dpi=120, bbox_inches="tight")
    return fig
