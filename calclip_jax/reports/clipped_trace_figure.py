"""The clipped-token trace as a figure: mean log-prob change against lag, one series per group."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from calclip_jax.analysis.clipped_trace import GROUPS
from calclip_jax.reports.clipped_trace import TraceRow
from calclip_jax.reports.plots import finish_figure


def trace_figure(rows: list[TraceRow], save: str | Path | None = None) -> Figure:
    """Each (s, t) group's mean dlogp with its 90% interval at lag t - s (groups side by side),
    a line through each group's mean over s per lag, a zero line."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    lags = sorted({r.lag for r in rows})
    width = 0.12 * (min(np.diff(lags)) if len(lags) > 1 else 1)
    for i, group in enumerate(GROUPS):
        mine = [r for r in rows if r.shift.group == group and math.isfinite(r.shift.shift.estimate)]
        if not mine:
            continue
        iv = [r.shift.shift for r in mine]
        x = np.array([r.lag for r in mine]) + (i - 1) * width
        y = np.array([v.estimate for v in iv])
        err = np.array([[v.estimate - v.low, v.high - v.estimate] for v in iv]).T
        bars = ax.errorbar(x, y, yerr=np.nan_to_num(err), fmt="o", capsize=3, alpha=0.6)
        by_lag: dict[int, list[float]] = {}
        for r in mine:
            by_lag.setdefault(r.lag, []).append(r.shift.shift.estimate)
        per_lag = sorted(by_lag)
        means = [np.mean(by_lag[lag]) for lag in per_lag]
        color = bars.lines[0].get_color()
        ax.plot(np.array(per_lag) + (i - 1) * width, means, color=color, label=group)
    ax.axhline(0.0, color="grey", linewidth=0.8)
    ax.set_xlabel("lag t - s (RL steps)")
    ax.set_ylabel("mean logp_t - old_logp_full")
    ax.set_title("Tokens of step s under the policy after step t (90% bootstrap)", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return finish_figure(fig, save)
