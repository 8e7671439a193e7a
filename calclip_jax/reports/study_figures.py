"""The study's own figures (matplotlib): distortion bars, entropy rebound per arm, lower clipping
by token probability. The curve figures are `plots.plot_curves`'.

`arms` is `study.load_all`'s: run name -> {"dir", "cols", "config"}.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from calclip_jax.analysis.ratio_noise import PROB_EDGES
from calclip_jax.analysis.surge import SURGE_FACTOR, max_rebound
from calclip_jax.reports import metrics as M
from calclip_jax.reports import plots
from calclip_jax.reports.study import mean
from calclip_jax.reports.study_dumps import probability_bins
from calclip_jax.workdir import run_record as R

SEED_PHASE_FOLDERS = ("seeds", "dapo_seeds", "stress_seeds", "stress_dapo_seeds")


def distortion_bars(arms: dict[str, dict], rows: Sequence[tuple[str, str, str]], out: Path) -> None:
    """Bars per (label, TIS arm, calibrated arm) of `rows` (the granularities): FP8 clip share
    (TIS arm, static bounds) vs the BF16 shadow's (same tokens as the calibrated arm's FP8),
    lower bound on A<0 and upper bound on A>0."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, (key, title) in zip(
        axes,
        (("clip_frac_lower_neg", "lower clip, A<0"), ("clip_frac_upper_pos", "upper clip, A>0")),
        strict=True,
    ):
        names, fp8, ref = [], [], []
        for g, tis_name, cal_name in rows:
            tis, cal = arms.get(tis_name), arms.get(cal_name)
            if tis and cal:
                names.append(g)
                fp8.append(100 * mean(tis["cols"].get(key)))
                ref.append(100 * mean(cal["cols"].get(f"{key}_ref")))
        x = np.arange(len(names))
        ax.bar(x - 0.2, fp8, 0.4, label="FP8 (TIS arm)")
        ax.bar(x + 0.2, ref, 0.4, label="BF16 shadow (in-step)")
        if "bf16" in arms:
            ax.axhline(
                100 * mean(arms["bf16"]["cols"].get(key)), color="k", ls="--", label="BF16 run"
            )
        ax.set_xticks(x, names)
        ax.set(title=title, ylabel="% of tokens clipped (static bounds)")
        ax.set_ylim(top=ax.get_ylim()[1] * 1.3)  # room for the legend above the bars
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8, loc="upper center", ncol=3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def precision_label(config: dict) -> str:
    """bf16 | fp8 | e5m2 | fp4: the trainer's forward precision family."""
    precision = str(M.config_value(config, "train.precision", ""))
    fwd = str(M.config_value(config, "train.fwd_format", "") or "")
    if not precision.startswith("fp8"):
        return "bf16"
    return {"e2m1": "fp4", "e5m2": "e5m2"}.get(fwd, "fp8")


def rebound_chart(arms: dict[str, dict], out: Path) -> None:
    """Max rebound of the smoothed entropy over its running minimum, one bar per arm of the
    boundary-search phases (and the study-setting arms at seed 0), against the surge threshold."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    names = [n for n in arms if "__seed" not in n and not n.startswith(SEED_PHASE_FOLDERS)]
    values, colors = [], []
    palette = {"bf16": "0.5", "fp8": "C0", "e5m2": "C1", "fp4": "C3"}
    for n in names:
        c, cfg = arms[n]["cols"], arms[n]["config"]
        ent = c.get("entropy", np.array([]))
        _, warm, window = R.surge_settings(cfg)
        values.append(max_rebound(ent, c["step"], warmup=warm, window=window) if ent.size else 1)
        colors.append(palette[precision_label(cfg)])
    fig, ax = plt.subplots(figsize=(8, 0.18 * len(names) + 1.2))
    y = np.arange(len(names))
    ax.barh(y, np.asarray(values) - 1.0, left=1.0, color=colors)
    ax.axvline(SURGE_FACTOR, color="C3", ls="--", label=f"surge threshold {SURGE_FACTOR}x")
    ax.set_yticks(y, names, fontsize=6)
    ax.invert_yaxis()
    ax.set(xlabel="max of (10-step mean entropy) / (its running minimum)", xlim=(1.0, 1.6))
    handles = [Patch(color=color, label=f"trainer {label}") for label, color in palette.items()]
    handles.append(ax.get_lines()[0])
    ax.legend(handles=handles, fontsize=7, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def probability_binned(arms: dict[str, dict], names: Sequence[str], out: Path | None) -> str:
    """`study_dumps.probability_bins`' table, and its figure in `out` (one colour and legend
    entry per arm, its seeds' mean; FP8 solid, BF16 shadow dashed), none when `out` is None."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    table, curves = probability_bins(arms, names)
    if out is None:
        return table
    edges = np.array(PROB_EDGES)
    fig, ax = plt.subplots(figsize=(7, 3.8))
    x = np.arange(len(edges) - 1)
    colors = plots.arm_colors(list(curves))
    handles = []
    for arm, runs in curves.items():
        with warnings.catch_warnings():  # a bin empty in every seed stays NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            fr_fp8, fr_ref = (
                np.nanmean(np.array([run[i] for run in runs], dtype=float), axis=0) for i in (0, 1)
            )
        label = arm if len(runs) == 1 else f"{arm} ({len(runs)} seeds)"
        handles += ax.plot(x, fr_fp8, marker="o", color=colors[arm], label=label)
        ax.plot(x, fr_ref, marker="x", ls="--", color=colors[arm], label="_shadow")
    styles = [
        Line2D([], [], color="k", marker="o", label="FP8"),
        Line2D([], [], color="k", marker="x", ls="--", label="BF16 shadow (same tokens)"),
    ]
    ax.set_xticks(x, [f"[{a:.2f},{min(b, 1):.2f})" for a, b in itertools.pairwise(edges)],
                  rotation=20)  # fmt: skip
    ax.set(
        xlabel="old-policy probability of the token",
        ylabel="share of A<0 tokens with r < 1-eps_low",
        title="Lower-bound clipping by token probability (same tokens)",
    )
    ax.grid(alpha=0.3)
    ax.legend(handles=styles + handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              ncol=1 + len(handles) // 30, frameon=False)  # fmt: skip
    fig.tight_layout()
    fig.savefig(out, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return table
