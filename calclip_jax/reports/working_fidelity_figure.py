"""Each arm's working fidelity over RL steps: one panel per reported share (`REPORTED`)."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from calclip_jax.reports.plots import arm_colors, finish_figure
from calclip_jax.reports.working_fidelity import LABELS, REPORTED, Fidelity, seed_means

PANELS_PER_ROW = 4


def fidelity_figure(fidelity: Fidelity, save: str | Path | None = None) -> Figure:
    """Share of each batch (mean over seeds) against the dump's RL step, a line per arm."""
    means = seed_means(fidelity)
    colors = arm_colors(list(means))
    rows = math.ceil(len(REPORTED) / PANELS_PER_ROW)
    fig, grid = plt.subplots(
        rows, PANELS_PER_ROW, figsize=(3.4 * PANELS_PER_ROW, 3.2 * rows), sharey=True, squeeze=False
    )
    axes = list(grid.flat)
    for ax in axes[len(REPORTED) :]:
        fig.delaxes(ax)
    axes = axes[: len(REPORTED)]
    for ax, field in zip(axes, REPORTED, strict=True):
        for arm, by_step in means.items():
            steps = sorted(by_step)
            ax.plot(
                steps,
                [100 * by_step[s][field] for s in steps],
                marker=".",
                color=colors[arm],
                label=arm,
            )
        ax.set_title(LABELS[field], fontsize=9)
        ax.set_xlabel("RL step")
        ax.set_ylim(-3, 103)
        ax.grid(alpha=0.3)
    for ax in grid[:, 0]:
        ax.set_ylabel("% of the sampled batch")
    axes[-1].legend(fontsize=7)
    return finish_figure(fig, save)
