"""The study's tables from the ratio dumps (same tokens, FP8 vs BF16 shadow): lower clipping by
token probability, precision noise, batch composition vs precision noise.

`arms` is `study.load_all`'s: run name -> {"dir", "cols", "config"}.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from calclip_jax.analysis.ratio_noise import PROB_EDGES, pooled_tokens
from calclip_jax.reports import metrics as M
from calclip_jax.reports.study import fmt, mean, study_arm
from calclip_jax.workdir import run_record as R
from calclip_jax.workdir.ratio_dumps import load_dumps

# arm -> per run: (share below the lower bound per probability bin, FP8; the same, BF16 shadow)
Curves = dict[str, list[tuple[list[float], list[float]]]]


def probability_bins(arms: dict[str, dict], names: Sequence[str]) -> tuple[str, Curves]:
    """Share of A<0 tokens below the static lower bound, FP8 vs BF16 shadow on the same tokens,
    binned by the token's old probability (`PROB_EDGES`): the table (one row per run with
    dumps) and the curves of each arm (`study.study_arm`), one per run."""
    edges = np.array(PROB_EDGES)
    lines = [
        "| arm | dumps | tokens A<0 | "
        + " | ".join(f"p in [{a:.2f},{min(b, 1):.2f})" for a, b in itertools.pairwise(edges))
        + " |",
        "|---|---|---|" + "---|" * (len(edges) - 1),
    ]
    curves: Curves = {}
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
            cells.append(f"{fmt(f8, True)} vs {fmt(rf, True)} (n={n})")
        lines.append(f"| {name} | {len(dumps)} | {fp8.size} | " + " | ".join(cells) + " |")
        curves.setdefault(study_arm(name), []).append((fr_fp8, fr_ref))
    return "\n".join(lines), curves


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
        fmt(float((abs(d) > 0.1).mean()), True),
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
        fwd = str(M.config_value(arm["config"], "train.fwd_format", "") or "")
        lines.append(
            f"| {name} | {precision}{f' ({fwd})' if fwd else ''} | {int(np.isfinite(std).sum())} "
            f"| {mean(std):.4f} / {peak:.3f} | "
            f"{fmt(mean(c.get('composition_clip_lower_neg')), True)} / "
            f"{fmt(mean(c.get('composition_clip_upper_pos')), True)} | {noise} |"
        )
    if invariant:
        lines.append(
            f"| {len(invariant)} other arms (BF16, channel, block, MX, delayed after its first "
            "step) | - | - | 0 / 0 (exactly) | 0 / 0 | see the noise table |"
        )
    return "\n".join(lines)
