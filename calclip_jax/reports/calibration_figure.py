"""What Calibrated Clipping asked for and what it used, over RL steps, for each calibrating arm of
a seeded sweep: the lower bound the quantile gave (`calib_lower_raw`) against the one in use
(`clip_lower`, after the floor), the upper bound in use, and the BF16 shadow's share of A<0 tokens
below the static bound, which the lower bound is set to reproduce (`calib_q_lower`)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from calclip_jax.reports.paired_arms import Runs, run_ends, step_matrix
from calclip_jax.reports.plots import arm_colors, finish_figure

CALIBRATING_KEY = "calib_lower_raw"  # logged only where a calibration ran
PANEL_KEYS = ("clip_lower", CALIBRATING_KEY, "clip_upper", "calib_q_lower")
SEED_STYLES = (("-", "o"), ("--", "x"), (":", "^"), ("-.", "s"))  # line, dot: an arm's seeds apart


def calibrating_arms(runs: Runs) -> list[str]:
    """Arms with at least one calibration logged, by name."""
    return sorted(
        arm
        for arm, by_seed in runs.items()
        if np.isfinite(
            step_matrix(
                by_seed, sorted(by_seed), CALIBRATING_KEY, run_ends(by_seed, sorted(by_seed))
            )
        ).any()
    )


def calibration_bounds(runs: Runs, save: str | Path | None = None) -> Figure | None:
    """Three panels over RL steps, one line per (calibrating arm, seed): a colour per arm, a line
    style (and marker) per seed of it; None without such an arm. Left: the lower bound asked for
    (dots) and in use (line), log scale; middle: the upper bound in use; right: the shadow's
    target share of A<0 tokens, percent."""
    arms = calibrating_arms(runs)
    if not arms:
        return None
    colors = arm_colors(arms)
    fig, (low, up, share) = plt.subplots(1, 3, figsize=(13.5, 3.8))
    for arm in arms:
        by_seed = runs[arm]
        seeds = sorted(by_seed)
        ends = run_ends(by_seed, seeds)
        x = np.arange(1, max(ends) + 1)
        lines = {k: step_matrix(by_seed, seeds, k, ends) for k in PANEL_KEYS}
        for i, seed in enumerate(seeds):
            style = {"color": colors[arm], "linestyle": SEED_STYLES[i % len(SEED_STYLES)][0]}
            marker = SEED_STYLES[i % len(SEED_STYLES)][1]
            low.plot(x, lines["clip_lower"][i], label=f"{arm} (seed {seed})", **style)
            low.scatter(x, lines[CALIBRATING_KEY][i], color=colors[arm], marker=marker, s=10)
            up.plot(x, lines["clip_upper"][i], **style)
            share.plot(x, 100 * lines["calib_q_lower"][i], marker=".", **style)
    low.set_yscale("log")
    low.set_title("lower bound: asked for (dots), in use (line)", fontsize=9)
    up.set_title("upper bound in use", fontsize=9)
    share.set_title("shadow's A<0 share below the static bound (%)", fontsize=9)
    for ax in (low, up, share):
        ax.set_xlabel("RL step")
        ax.grid(alpha=0.3)
    low.legend(fontsize=7)
    return finish_figure(fig, save)
