"""The clipped-token trace as a figure: mean log-prob change against lag, one series per group."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from calclip_jax.analysis.clipped_trace import GROUPS
from calclip_jax.reports.clipped_trace import TraceRow
from calclip_jax.reports.plots import finish_figure


def _panel(ax: Axes, rows: list[TraceRow], measure: str, ylabel: str) -> None:
    """Each (s, t) group's mean of `measure` ("shift" or "after") with its 90% interval at lag
    t - s (groups side by side), a line through each group's mean over s per lag."""
    lags = sorted({r.lag for r in rows})
    width = 0.12 * (min(np.diff(lags)) if len(lags) > 1 else 1)
    for i, group in enumerate(GROUPS):
        mine = [
            (r.lag, getattr(r.shift, measure))
            for r in rows
            if r.shift.group == group and math.isfinite(getattr(r.shift, measure).estimate)
        ]
        if not mine:
            continue
        x = np.array([lag for lag, _ in mine]) + (i - 1) * width
        y = np.array([v.estimate for _, v in mine])
        err = np.array([[v.estimate - v.low, v.high - v.estimate] for _, v in mine]).T
        bars = ax.errorbar(x, y, yerr=np.nan_to_num(err), fmt="o", capsize=3, alpha=0.6)
        by_lag: dict[int, list[float]] = {}
        for lag, v in mine:
            by_lag.setdefault(lag, []).append(v.estimate)
        per_lag = sorted(by_lag)
        means = [np.mean(by_lag[lag]) for lag in per_lag]
        color = bars.lines[0].get_color()
        ax.plot(np.array(per_lag) + (i - 1) * width, means, color=color, label=group)
    ax.axhline(0.0, color="grey", linewidth=0.8)
    ax.set_xlabel("lag t - s (RL steps)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)


def trace_figure(rows: list[TraceRow], save: str | Path | None = None) -> Figure:
    """Two panels: the groups' log-prob change since step s sampled them, and since step s's
    updates ended; 90% bootstrap intervals over rows, a zero line."""
    fig, (since, after) = plt.subplots(1, 2, figsize=(10.0, 4.0), sharex=True)
    _panel(since, rows, "shift", "mean logp_t - old_logp_full")
    _panel(after, rows, "after", "mean logp_t - logp after step s")
    since.legend(fontsize=8)
    fig.suptitle("Tokens of step s under the policy after step t (90% bootstrap)", fontsize=10)
    return finish_figure(fig, save)
