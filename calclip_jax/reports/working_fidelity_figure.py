"""Each arm's working fidelity over RL steps: one panel per reported share (`REPORTED`)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from calclip_jax.reports.plots import arm_colors, finish_figure
from calclip_jax.reports.working_fidelity import LABELS, REPORTED, Fidelity, seed_means


def fidelity_figure(fidelity: Fidelity, save: str | Path | None = None) -> Figure:
    """Share of each batch (mean over seeds) against the dump's RL step, a line per arm."""
    means = seed_means(fidelity)
    colors = arm_colors(list(means))
    fig, axes = plt.subplots(1, len(REPORTED), figsize=(3.4 * len(REPORTED), 3.2), sharey=True)
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
    axes[0].set_ylabel("% of the sampled batch")
    axes[-1].legend(fontsize=7)
    return finish_figure(fig, save)
