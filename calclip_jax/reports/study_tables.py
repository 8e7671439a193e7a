"""The study's tables from the logged metrics: ratio distortion, training dynamics, seeds.

`arms` is `study.load_all`'s: run name -> {"dir", "cols", "config"}.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from calclip_jax.analysis.stats import FINAL_STEPS, last_finite
from calclip_jax.analysis.surge import detect_surge, max_rebound
from calclip_jax.reports import metrics as M
from calclip_jax.reports.study import SeedRuns, final, fmt, mean
from calclip_jax.workdir import run_record as R


def distortion_table(
    arms: dict[str, dict], rows: Sequence[tuple[str, str, str]], bf16: str = "bf16"
) -> str:
    """Clip fractions at the static bounds by advantage sign: FP8 (the TIS arm) vs the BF16
    shadow (the calibrated arm), one row per (label, TIS arm, calibrated arm), e.g. the
    granularity phase's `study.granularity_rows("", granularities)`."""
    lines = [
        "| precision | FP8 lower/A<0 (TIS arm) | BF16 shadow lower/A<0 (calib arm) | ratio "
        "| FP8 upper/A>0 | BF16 shadow upper/A>0 | ratio | FP8 under calibrated bounds lower/A<0 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    if bf16 in arms:
        c = arms[bf16]["cols"]
        lines.append(
            f"| bf16 (own run) | {fmt(mean(c.get('clip_frac_lower_neg')), True)} | - | - | "
            f"{fmt(mean(c.get('clip_frac_upper_pos')), True)} | - | - | - |"
        )
    for label, tis_name, cal_name in rows:
        tis, cal = arms.get(tis_name), arms.get(cal_name)
        if not tis or not cal:
            continue
        lo, up = (
            mean(tis["cols"].get("clip_frac_lower_neg")),
            mean(tis["cols"].get("clip_frac_upper_pos")),
        )
        lo_ref = mean(cal["cols"].get("clip_frac_lower_neg_ref"))
        up_ref = mean(cal["cols"].get("clip_frac_upper_pos_ref"))
        lo_cal = mean(cal["cols"].get("clip_frac_lower_neg"))
        lines.append(
            f"| {label} | {fmt(lo, True)} | {fmt(lo_ref, True)} | {lo / lo_ref:.1f}x | "
            f"{fmt(up, True)} | {fmt(up_ref, True)} | {up / up_ref:.1f}x | {fmt(lo_cal, True)} |"
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
            f"| {name} | {steps} | {fmt(final(c.get('reward_mean')))} | "
            f"{fmt(ev[0] if ev.size else math.nan)} -> {fmt(ev[-1] if ev.size else math.nan)} | "
            f"{fmt(finite[0] if finite.size else math.nan)} / {fmt(np.nanmin(ent))} / "
            f"{fmt(peak_after)} / {fmt(finite[-1] if finite.size else math.nan)} | "
            f"{surge if surge is not None else 'none'} / {raw if raw is not None else 'none'} | "
            f"{fmt(rebound)} | {fmt(final(c.get('response_len_mean')))} | "
            f"{fmt(final(c.get('garbled_frac')), True)} | "
            f"{mean(c.get('mismatch_k3')):.1e} |"
        )
    return "\n".join(lines)


def _final_values(run: dict) -> tuple[float, float]:
    """(final reward, last eval accuracy) of one run."""
    cols = run["cols"]
    return final(cols.get("reward_mean")), last_finite(cols.get("eval_accuracy"), math.nan)


def _finished(run: dict) -> bool:
    return run["cols"]["step"][-1] == M.config_value(run["config"], "train.steps", -1)


def _fmt_signed(v: float) -> str:
    return f"{v:+.3f}" if math.isfinite(v) else "-"


def seeds_table(arms: dict[str, dict], seed_runs: SeedRuns) -> str:
    """Per group of `seed_runs` (`study.seed_runs`) and arm: final reward and eval accuracy at
    each seed, mean ± std, and the paired difference to BF16 of the same seed (same SFT start,
    same prompts)."""
    lines = [
        "| algo | arm | metric | per seed | mean ± std | paired diff vs BF16 (mean; per seed) |",
        "|---|---|---|---|---|---|",
    ]
    sd = lambda x: x.std(ddof=1) if x.size > 1 else math.nan
    for algo, (bases, patterns) in seed_runs.items():
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
                    f"| {algo} | {base} | {metric} | {', '.join(fmt(v) for v in x)} | "
                    f"{ok.mean():.3f}{f' ± {sd(ok):.3f}' if ok.size > 1 else ''} (n={ok.size}) "
                    f"| {diff} |"
                )
    return "\n".join(lines)
