"""Tables and figures of RESULTS.md from the study's sweep directories.

    python -m experiments.report --results=results

Reads every arm under <results>/<phase>/ (the phases of configs/study.py; missing phases are
skipped), writes <results>/tables.md and PNG figures into <results>/figures/.
"""

from __future__ import annotations

import itertools
import math
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from absl import app, flags

from calclip_jax.analysis import metrics as M
from calclip_jax.analysis import plots
from calclip_jax.analysis import run_record as R
from calclip_jax.analysis.ratio_dumps import PROB_EDGES, load_dumps, pooled_tokens
from calclip_jax.analysis.stats import FINAL_STEPS, final_value, finite_mean, last_finite
from calclip_jax.analysis.surge import (
    SURGE_FACTOR,
    detect_surge,
    max_rebound,
)
from configs import study
from configs.arms import FP8_PRESET_SUFFIXES

_RESULTS = flags.DEFINE_string("results", "results", "Folder holding the study's sweep dirs.")
PHASES = tuple(study.PHASES)  # a phase without a folder under --results is skipped
SEARCH_PHASES = study.BOUNDARY_SEARCH_PHASES
REAL_MODEL_PHASES = study.REAL_MODEL_PHASES
OWN_FIGURE_PHASES = (*SEARCH_PHASES, *REAL_MODEL_PHASES)  # a curve figure + distortion table each
REAL_MODEL_CURVES = (
    "reward_mean",
    "eval_accuracy",
    "entropy",
    "garbled_frac",
    "clip_frac_lower_neg",
    "clip_frac_lower_neg_ref",
)
HEADLINE = study.HEADLINE_ARMS
STRESS_ARMS = tuple(study.stress_seed_arms())
# group -> (arms, run names at seeds 0, 1, ... with the arm's name as "{}")
SEED_RUNS = {
    "GRPO": (HEADLINE, ("{}", *(f"{{}}__seed{s}" for s in study.EXTRA_SEEDS))),
    "DAPO": (
        HEADLINE,
        ("dapo/dapo_{}", *(f"dapo_seeds/dapo_{{}}__seed{s}" for s in study.EXTRA_SEEDS)),
    ),
    "GRPO stress": (
        STRESS_ARMS,
        ("stress/{}", *(f"stress_seeds/{{}}__seed{s}" for s in study.STRESS_SEEDS)),
    ),
    "DAPO stress, Countdown": (
        tuple(study.stress_dapo_seed_arms()),
        ("stress_dapo/{}", *(f"stress_dapo_seeds/{{}}__seed{s}" for s in study.STRESS_SEEDS)),
    ),
}


def _mean(x: np.ndarray | None) -> float:
    """Mean over all logged steps (NaN when none)."""
    return finite_mean(x, default=math.nan)


def _final(x: np.ndarray | None) -> float:
    """`stats.final_value`: mean over the last FINAL_STEPS logged steps (NaN when none)."""
    return final_value(x, default=math.nan)


def _fmt(v: float, pct: bool = False) -> str:
    if v is None or not math.isfinite(v):
        return "-"
    return f"{100 * v:.2f}%" if pct else f"{v:.3f}"


def check_results(root: Path) -> None:
    """ValueError when `root` is no folder or holds no run under a phase folder: the report would
    be empty tables and blank figures."""
    if not root.is_dir():
        raise ValueError(f"--results={root}: no such folder")
    if not any(R.find_arms(root / phase) for phase in PHASES):
        raise ValueError(
            f"--results={root}: no runs in any phase folder; expected <results>/<phase>/<arm>/ "
            f"with phases {', '.join(PHASES)}"
        )


def load_all(root: Path) -> dict[str, dict]:
    """arm name -> {"dir", "cols", "config"} for every arm of every phase present."""
    arms = {}
    for phase in PHASES:
        for name, path in R.find_arms(root / phase).items():
            cols = M.load_columns(path)
            if cols.get("step") is None or cols["step"].size == 0:
                continue
            key = name if phase in ("granularity", "seeds") else f"{phase}/{name}"
            arms[key] = {"dir": path, "cols": cols, "config": R.load_config(path) or {}}
    return arms


LADDER = (  # label, TIS arm, TIS + CalClip arm (configs/study.py ladder phases)
    ("E4M3 (MXFP8)", "fp8_mx_tis", "fp8_mx_tis_calib"),
    ("E5M2", "fp8_mx_tis_e5m2", "fp8_mx_tis_calib_e5m2"),
    ("E2M1 (MXFP4)", "fp4_mx_tis", "fp4_mx_tis_calib"),
)


def granularity_rows(
    prefix: str = "", granularities: Sequence[str] = FP8_PRESET_SUFFIXES
) -> list[tuple[str, str, str]]:
    """(label, TIS arm, calibrated arm) per granularity: `<prefix>fp8_<g>_tis[_calib]`."""
    return [(g, f"{prefix}fp8_{g}_tis", f"{prefix}fp8_{g}_tis_calib") for g in granularities]


def distortion_table(
    arms: dict[str, dict],
    rows: Sequence[tuple[str, str, str]] | None = None,
    bf16: str = "bf16",
) -> str:
    """Clip fractions at the static bounds by advantage sign: FP8 (the TIS arm) vs the BF16
    shadow (the calibrated arm), one row per (label, TIS arm, calibrated arm); default: the
    granularity phase."""
    rows = granularity_rows() if rows is None else rows
    lines = [
        "| precision | FP8 lower/A<0 (TIS arm) | BF16 shadow lower/A<0 (calib arm) | ratio "
        "| FP8 upper/A>0 | BF16 shadow upper/A>0 | ratio | FP8 under calibrated bounds lower/A<0 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    if bf16 in arms:
        c = arms[bf16]["cols"]
        lines.append(
            f"| bf16 (own run) | {_fmt(_mean(c.get('clip_frac_lower_neg')), True)} | - | - | "
            f"{_fmt(_mean(c.get('clip_frac_upper_pos')), True)} | - | - | - |"
        )
    for label, tis_name, cal_name in rows:
        tis, cal = arms.get(tis_name), arms.get(cal_name)
        if not tis or not cal:
            continue
        lo, up = (
            _mean(tis["cols"].get("clip_frac_lower_neg")),
            _mean(tis["cols"].get("clip_frac_upper_pos")),
        )
        lo_ref = _mean(cal["cols"].get("clip_frac_lower_neg_ref"))
        up_ref = _mean(cal["cols"].get("clip_frac_upper_pos_ref"))
        lo_cal = _mean(cal["cols"].get("clip_frac_lower_neg"))
        lines.append(
            f"| {label} | {_fmt(lo, True)} | {_fmt(lo_ref, True)} | {lo / lo_ref:.1f}x | "
            f"{_fmt(up, True)} | {_fmt(up_ref, True)} | {up / up_ref:.1f}x | {_fmt(lo_cal, True)} |"
        )
    return "\n".join(lines)


def dynamics_table(arms: dict[str, dict]) -> str:
    """Per arm: reward, eval accuracy, entropy path, surge, max rebound of the smoothed entropy
    over its running minimum (the surge threshold is k = 1.5), length, garbled share, mismatch."""
    lines = [
        f"| arm | steps | reward (last {FINAL_STEPS}) | eval acc first -> last | entropy first / "
        "min / peak after min / last | surge step (10-step mean / raw) | max rebound | resp len | "
        "garbled | mismatch k3 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, arm in arms.items():
        c, cfg = arm["cols"], arm["config"]
        ent = c.get("entropy", np.array([]))
        finite = ent[np.isfinite(ent)] if ent.size else ent
        k, warm, window = R.surge_settings(cfg)
        surge = raw = None
        rebound = math.nan
        if ent.size:
            surge = detect_surge(ent, c["step"], k=k, warmup=warm, window=window)
            raw = detect_surge(ent, c["step"], k=k, warmup=warm, window=1)
            rebound = max_rebound(ent, c["step"], warmup=warm, window=window)
        i_min = int(np.nanargmin(ent)) if finite.size else 0
        peak_after = float(np.nanmax(ent[i_min:])) if finite.size else math.nan
        ev = c.get("eval_accuracy", np.array([]))
        ev = ev[np.isfinite(ev)] if ev.size else ev
        planned = M.config_value(cfg, "train.steps", None)
        steps = f"{int(c['step'][-1])}" + ("" if planned == int(c["step"][-1]) else f"/{planned}")
        lines.append(
            f"| {name} | {steps} | {_fmt(_final(c.get('reward_mean')))} | "
            f"{_fmt(ev[0] if ev.size else math.nan)} -> {_fmt(ev[-1] if ev.size else math.nan)} | "
            f"{_fmt(finite[0] if finite.size else math.nan)} / {_fmt(np.nanmin(ent))} / "
            f"{_fmt(peak_after)} / {_fmt(finite[-1] if finite.size else math.nan)} | "
            f"{surge if surge is not None else 'none'} / {raw if raw is not None else 'none'} | "
            f"{_fmt(rebound)} | {_fmt(_final(c.get('response_len_mean')))} | "
            f"{_fmt(_final(c.get('garbled_frac')), True)} | "
            f"{_mean(c.get('mismatch_k3')):.1e} |"
        )
    return "\n".join(lines)


def _final_values(run: dict) -> tuple[float, float]:
    """(final reward, last eval accuracy) of one run."""
    cols = run["cols"]
    return _final(cols.get("reward_mean")), last_finite(cols.get("eval_accuracy"), math.nan)


def _finished(run: dict) -> bool:
    return run["cols"]["step"][-1] == M.config_value(run["config"], "train.steps", -1)


def seeds_table(arms: dict[str, dict]) -> str:
    """Per algorithm and headline arm: final reward and eval accuracy at each seed, mean ± std,
    and the paired difference to BF16 of the same seed (same SFT start, same prompts)."""
    lines = [
        "| algo | arm | metric | per seed | mean ± std | paired diff vs BF16 (mean; per seed) |",
        "|---|---|---|---|---|---|",
    ]
    sd = lambda x: x.std(ddof=1) if x.size > 1 else math.nan
    for algo, (bases, patterns) in SEED_RUNS.items():
        finals = {}
        for base in bases:
            runs = [arms.get(p.format(base)) for p in patterns]
            finals[base] = np.array(
                [_final_values(r) if r and _finished(r) else (math.nan, math.nan) for r in runs]
            )
        for base in bases:
            for j, metric in enumerate((f"reward (last {FINAL_STEPS})", "final eval acc")):
                x = finals[base][:, j]
                ok = x[np.isfinite(x)]
                if not ok.size:
                    continue
                diff = "-"
                if base != "bf16":
                    d = x - finals["bf16"][:, j]
                    dd = d[np.isfinite(d)]
                    if dd.size:
                        diff = f"{dd.mean():+.3f}; " + ", ".join(_fmt_signed(v) for v in d)
                lines.append(
                    f"| {algo} | {base} | {metric} | {', '.join(_fmt(v) for v in x)} | "
                    f"{ok.mean():.3f}{f' ± {sd(ok):.3f}' if ok.size > 1 else ''} (n={ok.size}) "
                    f"| {diff} |"
                )
    return "\n".join(lines)


def _fmt_signed(v: float) -> str:
    return f"{v:+.3f}" if math.isfinite(v) else "-"


def distortion_bars(arms: dict[str, dict], out: Path) -> None:
    """Bars per granularity: FP8 clip share (TIS arm, static bounds) vs the BF16 shadow's (same
    tokens as the calibrated arm's FP8), lower bound on A<0 and upper bound on A>0."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, (key, title) in zip(
        axes,
        (("clip_frac_lower_neg", "lower clip, A<0"), ("clip_frac_upper_pos", "upper clip, A>0")),
        strict=True,
    ):
        names, fp8, ref = [], [], []
        for g, tis_name, cal_name in granularity_rows():
            tis, cal = arms.get(tis_name), arms.get(cal_name)
            if tis and cal:
                names.append(g)
                fp8.append(100 * _mean(tis["cols"].get(key)))
                ref.append(100 * _mean(cal["cols"].get(f"{key}_ref")))
        x = np.arange(len(names))
        ax.bar(x - 0.2, fp8, 0.4, label="FP8 (TIS arm)")
        ax.bar(x + 0.2, ref, 0.4, label="BF16 shadow (in-step)")
        if "bf16" in arms:
            ax.axhline(
                100 * _mean(arms["bf16"]["cols"].get(key)), color="k", ls="--", label="BF16 run"
            )
        ax.set_xticks(x, names)
        ax.set(title=title, ylabel="% of tokens clipped (static bounds)")
        ax.set_ylim(top=ax.get_ylim()[1] * 1.3)  # room for the legend above the bars
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8, loc="upper center", ncol=3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def _noise_cells(d: np.ndarray, adv: np.ndarray, prob: np.ndarray) -> str:
    """The noise table's cells after the token count (see `noise_table`)."""
    signs, low = (adv < 0, adv > 0), prob < 0.5

    def pair(values: list[float | None]) -> str:
        return " / ".join("-" if v is None else f"{v:.3f}" for v in values)

    def std(sel: np.ndarray) -> float | None:
        return float(d[sel].std()) if sel.any() else None

    cells = [
        pair([std(s) for s in signs]),
        pair([std(s & low) for s in signs]),
        pair([std(s & ~low) for s in signs]),
        pair([float(low[s].mean()) if s.any() else None for s in signs]),
        _fmt(float((abs(d) > 0.1).mean()), True),
    ]
    return " | ".join(cells)


def noise_table(arms: dict[str, dict], names: Sequence[str]) -> str:
    """Precision noise of the ratio on the same tokens: d = log r_FP8 - log r_BF16-shadow over
    all dumped response tokens. Its std by advantage sign, overall and split at old-policy
    probability 0.5 (is a sign asymmetry more than A<0 tokens being less likely?), the share of
    low-probability tokens per sign, and the share with |d| > 0.1. Arms with a BF16 trainer are
    left out (their shadow is the trainer itself: d = 0 exactly)."""
    lines = [
        "| arm | dumps | tokens | std d, A<0 / A>0 | std d at p<0.5, A<0 / A>0 "
        "| std d at p>=0.5, A<0 / A>0 | share p<0.5, A<0 / A>0 | share abs(d) > 0.1 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        precision = str(M.config_value(arms[name]["config"], "train.precision", ""))
        dumps = load_dumps(arms[name]["dir"])
        if not dumps or not precision.startswith("fp8"):
            continue
        tok = pooled_tokens(dumps)
        ok = np.isfinite(tok["noise"])
        d, adv, prob = tok["noise"][ok], tok["advantages"][ok], tok["old_prob"][ok]
        lines.append(f"| {name} | {len(dumps)} | {d.size} | " + _noise_cells(d, adv, prob) + " |")
    return "\n".join(lines)


def composition_table(arms: dict[str, dict]) -> str:
    """The batch-composition effect, apart from the precision noise. Composition: old log-probs
    of the same parameters in the same precision, computed on the whole rollout batch vs on the
    minibatches the updates see (`composition_*` metrics, at ratio-dump steps); the shares are
    the A<0 / A>0 tokens such whole-batch old log-probs would clip at the first update, where
    the ratio is 1. Precision noise: d = log r_FP8 - log r_BF16-shadow on the dumped tokens.
    Arms whose composition effect is exactly 0 in every dump share one row."""
    lines = [
        "| arm | trainer | dumps | composition std / max abs dlogp | composition-clipped at "
        "update 0, A<0 / A>0 | precision noise std d, A<0 / A>0 |",
        "|---|---|---|---|---|---|",
    ]
    invariant = []
    for name, arm in arms.items():
        c = arm["cols"]
        std = c.get("composition_logp_std")
        if std is None or not np.isfinite(std).any():
            continue
        peak = c.get("composition_logp_max")
        peak = float(np.nanmax(peak)) if peak is not None else math.nan
        if peak == 0.0:
            invariant.append(name)
            continue
        noise = "-"
        tok = pooled_tokens(load_dumps(arm["dir"]))
        if "noise" in tok:
            ok = np.isfinite(tok["noise"])
            d, adv = tok["noise"][ok], tok["advantages"][ok]
            noise = " / ".join(f"{d[s].std():.3f}" if s.any() else "-" for s in (adv < 0, adv > 0))
        precision = str(M.config_value(arm["config"], "train.precision", ""))
        fmt = str(M.config_value(arm["config"], "train.fwd_format", "") or "")
        lines.append(
            f"| {name} | {precision}{f' ({fmt})' if fmt else ''} | {int(np.isfinite(std).sum())} "
            f"| {_mean(std):.4f} / {peak:.3f} | "
            f"{_fmt(_mean(c.get('composition_clip_lower_neg')), True)} / "
            f"{_fmt(_mean(c.get('composition_clip_upper_pos')), True)} | {noise} |"
        )
    if invariant:
        lines.append(
            f"| {len(invariant)} other arms (BF16, channel, block, MX, delayed after its first "
            "step) | - | - | 0 / 0 (exactly) | 0 / 0 | see the noise table |"
        )
    return "\n".join(lines)


def _precision_label(config: dict) -> str:
    """bf16 | fp8 | e5m2 | fp4: the trainer's forward precision family."""
    precision = str(M.config_value(config, "train.precision", ""))
    fmt = str(M.config_value(config, "train.fwd_format", "") or "")
    if not precision.startswith("fp8"):
        return "bf16"
    return {"e2m1": "fp4", "e5m2": "e5m2"}.get(fmt, "fp8")


def rebound_chart(arms: dict[str, dict], out: Path) -> None:
    """Max rebound of the smoothed entropy over its running minimum, one bar per arm of the
    boundary-search phases (and the study-setting arms at seed 0), against the surge threshold."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    names = [
        n
        for n in arms
        if "__seed" not in n
        and not n.startswith(("seeds", "dapo_seeds", "stress_seeds", "stress_dapo_seeds"))
    ]
    values, colors = [], []
    palette = {"bf16": "0.5", "fp8": "C0", "e5m2": "C1", "fp4": "C3"}
    for n in names:
        c, cfg = arms[n]["cols"], arms[n]["config"]
        ent = c.get("entropy", np.array([]))
        _, warm, window = R.surge_settings(cfg)
        values.append(max_rebound(ent, c["step"], warmup=warm, window=window) if ent.size else 1)
        colors.append(palette[_precision_label(cfg)])
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


def study_arm(run: str) -> str:
    """The arm a study run belongs to: without `__seed<N>`, its `<phase>_seeds/` folder read as
    `<phase>/` (the seed-0 run's), so every seed of an arm is one legend entry."""
    arm = plots.seed_group(run)
    phase, sep, rest = arm.partition("/")
    if sep and phase.endswith("_seeds"):
        base = phase.removesuffix("_seeds")
        return rest if base == "" else f"{base}/{rest}"
    return arm


def probability_binned(arms: dict[str, dict], names: Sequence[str], out: Path | None) -> str:
    """From ratio dumps: share of A<0 tokens below the static lower bound, FP8 vs BF16 shadow on
    the same tokens, binned by the token's old probability; table (one row per run) + figure
    (one colour and legend entry per arm, its seeds' mean; FP8 solid, BF16 shadow dashed),
    none when `out` is None."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    edges = np.array(PROB_EDGES)
    lines = [
        "| arm | dumps | tokens A<0 | "
        + " | ".join(f"p in [{a:.2f},{min(b, 1):.2f})" for a, b in itertools.pairwise(edges))
        + " |",
        "|---|---|---|" + "---|" * (len(edges) - 1),
    ]
    curves: dict[str, list[tuple[list[float], list[float]]]] = {}
    for name in (n for n in names if n in arms):
        dumps = load_dumps(arms[name]["dir"])
        if not dumps:
            continue
        lower = R.clip_bounds(arms[name]["dir"])[0]
        tok = pooled_tokens(dumps)
        neg = tok["advantages"] < 0
        fp8, ref, prob = tok["ratio"][neg], tok["ratio_ref"][neg], tok["old_prob"][neg]
        cells, fr_fp8, fr_ref = [], [], []
        for a, b in itertools.pairwise(edges):
            inb = (prob >= a) & (prob < b)
            n = int(inb.sum())
            f8 = float((fp8[inb] < lower).mean()) if n else math.nan
            rf = float((ref[inb] < lower).mean()) if n else math.nan
            fr_fp8.append(f8), fr_ref.append(rf)
            cells.append(f"{_fmt(f8, True)} vs {_fmt(rf, True)} (n={n})")
        lines.append(f"| {name} | {len(dumps)} | {fp8.size} | " + " | ".join(cells) + " |")
        curves.setdefault(study_arm(name), []).append((fr_fp8, fr_ref))
    if out is None:
        return "\n".join(lines)
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
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    del argv
    root = Path(_RESULTS.value)
    try:
        check_results(root)
    except ValueError as err:
        sys.exit(f"error: {err}")
    figs = root / "figures"
    os.makedirs(figs, exist_ok=True)
    arms = load_all(root)
    headline_arms = (
        "bf16",
        "fp8_block_tis",
        "fp8_block_tis_calib",
        "fp8_tensor_tis",
        "fp8_tensor_tis_calib",
    )
    headline = {  # seed 0 (granularity phase) and its seeds (seeds phase): a band per arm
        n: a["dir"] for n, a in arms.items() if plots.seed_group(n) in headline_arms
    }
    plots.plot_curves(
        headline,
        keys=(
            "entropy",
            "reward_mean",
            "eval_accuracy",
            "clip_frac_lower_neg",
            "response_len_mean",
            "clip_lower",
        ),
        save=figs / "training_dynamics.png",
    )
    boundary = {n: a["dir"] for n, a in arms.items() if n.startswith("boundary/")}
    if boundary:
        plots.plot_curves(
            boundary,
            keys=("entropy", "reward_mean", "eval_accuracy", "clip_frac_lower_neg"),
            save=figs / "boundary.png",
        )
    for phase in OWN_FIGURE_PHASES:
        stress = {  # with the phase's seeds (<phase>_seeds/<arm>__seed<N>): a band per arm
            n.split("/", 1)[1]: a["dir"]
            for n, a in arms.items()
            if n.startswith((phase + "/", phase + "_seeds/"))
        }
        if stress:
            plots.plot_curves(
                stress,
                keys=REAL_MODEL_CURVES
                if phase in REAL_MODEL_PHASES
                else ("entropy", "reward_mean", "eval_accuracy", "clip_frac_lower_neg"),
                save=figs / f"{phase}.png",
            )
    calibrated = {  # the granularity phase's calibrated arms
        n: a["dir"] for n, a in arms.items() if n.endswith("_tis_calib") and "/" not in n
    }
    plots.plot_curves(
        calibrated, keys=("clip_lower", "clip_upper"), save=figs / "calibrated_bounds.png"
    )
    dumped = [n for n in arms if (arms[n]["dir"] / "ratios").is_dir()]
    uncalibrated = [n for n in dumped if n.endswith(("_tis", "_tis_e5m2"))]
    searched = [n for n in uncalibrated if n.startswith(SEARCH_PHASES)]
    real = [n for n in dumped if n.startswith(REAL_MODEL_PHASES)]
    binned = probability_binned(arms, dumped, None)  # every arm: a table, too many for a figure
    probability_binned(
        arms,
        [n for n in uncalibrated if n not in searched and n not in real],
        figs / "clip_by_probability.png",
    )
    if searched:
        probability_binned(arms, searched, figs / "search_clip_by_probability.png")
    for phase in REAL_MODEL_PHASES:
        if any(n.startswith(phase + "/") for n in real):
            probability_binned(
                arms,
                [n for n in real if n.startswith(phase + "/")],
                figs / f"{phase}_clip_by_probability.png",
            )
    distortion_bars(arms, figs / "distortion.png")
    rebound_chart(arms, figs / "rebound.png")
    text = "\n\n".join(
        [
            "## Ratio distortion (mean over all RL steps)",
            distortion_table(arms),
            "## Lower clipping by token probability (ratio dumps, same tokens)",
            binned,
            "## Precision noise of the ratio (ratio dumps, same tokens)",
            noise_table(arms, dumped),
            "## Batch composition vs precision noise (old log-probs, whole batch vs minibatch)",
            composition_table(arms),
            "## Training dynamics",
            dynamics_table(arms),
            "## Seeds",
            seeds_table(arms),
            *itertools.chain.from_iterable(
                (
                    f"## Ratio distortion, {phase} phase (mean over all RL steps)",
                    distortion_table(
                        arms,
                        [(lbl, f"{phase}/{t}", f"{phase}/{c}") for lbl, t, c in LADDER]
                        if phase.startswith("ladder")
                        else granularity_rows(f"{phase}/", ("tensor", "block")),
                        bf16=f"{phase}/bf16",
                    ),
                )
                for phase in OWN_FIGURE_PHASES
                if any(n.startswith(phase + "/") for n in arms)
            ),
        ]
    )
    (root / "tables.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    app.run(main)
