"""The clipped-token trace of a seeded sweep: per arm and lag, pooled over seeds.

    <sweep>/<arm>__seed<k>/ratios/trace_step_*.npz   (`log.trace_dumps`, or
                                                     `experiments.trace_checkpoint` afterwards)

For every arm and lag t - s, the rows of every traced dump at that lag (all seeds) give each
token group's mean log-prob change after step s's updates (`analysis.clipped_trace`, `after`), and
the contrast "A<0 clipped minus A<0 not clipped" over the same rows: positive when the tokens the
clip stopped pushing down fared better than the A<0 tokens it let through; the contrast again in
the BF16 shadow where the runs traced it (`shadow_after`). A row "all" pools the
lags of each run's latest trace (each dump once). Intervals resample seeds, then rows within
each seed (`analysis.paired`, blocks of one row); each seed's own value is listed too.

Clipped tokens are selected for a low log r at the end of step s; where r carries noise (FP8's
more than BF16's), part of their later gain in the trainer's precision is that noise not
recurring. The shadow's contrast carries no FP8 noise.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from calclip_jax.analysis.clipped_trace import (
    CLIPPED,
    GROUPS,
    UNCLIPPED,
    row_sums,
    step_log_ratio,
    token_groups,
)
from calclip_jax.analysis.paired import (
    N_BOOT,
    Interval,
    pad_seeds,
    ratio_difference,
    ratio_of_means,
)
from calclip_jax.reports.clipped_trace import trace_entries
from calclip_jax.workdir.ratio_dumps import trace_steps
from calclip_jax.workdir.run_record import find_arms
from calclip_jax.workdir.seed_names import split_seeded_name

ALL_LAGS = -1
SHADOW = "shadow "  # prefix of a group's BF16-shadow row sums
RowSums = tuple[np.ndarray, np.ndarray]  # (num, den) [B]: a group's per-row sum and token count


@dataclasses.dataclass(frozen=True)
class ArmTrace:
    """One arm at one lag, over its seeds."""

    arm: str
    lag: int  # t - s; ALL_LAGS: the latest trace's lags pooled
    seeds: tuple[int, ...]
    tokens: dict[str, int]  # per group of `GROUPS`
    after: dict[str, Interval]  # per group: mean log-prob change after step s
    contrast: Interval  # after: A<0 clipped minus A<0 not clipped
    shadow_contrast: Interval  # the same in the BF16 shadow (NaN: not traced)


def _run_sums(workdir: Path, last_step: int | None) -> dict[int, dict[str, list[RowSums]]]:
    """lag (and ALL_LAGS) -> group (and SHADOW + group) -> each traced dump's row sums of
    `after` (dlogp - step s's log r; in the shadow, NaN where not traced)."""
    out: dict[int, dict[str, list[RowSums]]] = {}
    entries = trace_entries(workdir, last_step)
    latest = max((e.t for e in entries), default=None)
    for e in entries:
        d = e.dump
        groups = token_groups(d["ratio"], d["advantages"], d["mask"], e.lower)
        after = e.dlogp - step_log_ratio(d["ratio"])
        shadow = np.full(after.shape, np.nan) if e.shadow_after is None else e.shadow_after
        for lag in (e.t - e.s, ALL_LAGS) if e.t == latest else (e.t - e.s,):
            by_group = out.setdefault(lag, {})
            for g in GROUPS:
                by_group.setdefault(g, []).append(row_sums(after, groups[g]))
                by_group.setdefault(SHADOW + g, []).append(_shadow_sums(shadow, groups[g]))
    return out


def _shadow_sums(values_BT: np.ndarray, sel_BT: np.ndarray) -> RowSums:
    """`row_sums`, NaN rows where the shadow was not traced (so they count as missing)."""
    num, den = row_sums(values_BT, sel_BT)
    traced = np.isfinite(values_BT).any(axis=1)
    return np.where(traced, num, np.nan), np.where(traced, den, np.nan)


def sweep_traces(
    sweep_dir: str | Path, n_boot: int = N_BOOT, seed: int = 0, last_step: int | None = None
) -> list[ArmTrace]:
    """Each traced arm's `ArmTrace` per lag (traces through `last_step`), by arm then lag; runs
    without a trace are left out, so an arm's seeds are those that traced."""
    sums: dict[str, dict[int, dict[int, dict[str, list[RowSums]]]]] = {}  # arm, lag, seed
    for name, workdir in find_arms(sweep_dir).items():
        if not trace_steps(workdir, last_step):
            continue
        arm, k = split_seeded_name(name)
        for lag, by_group in _run_sums(workdir, last_step).items():
            sums.setdefault(arm, {}).setdefault(lag, {})[k or 0] = by_group
    boot = {"n_boot": n_boot, "block": 1, "seed": seed}
    rows = []
    for arm in sorted(sums):
        for lag in sorted(sums[arm], key=lambda lag: (lag == ALL_LAGS, lag)):
            by_seed = dict(sorted(sums[arm][lag].items()))
            cells = {
                g: tuple(
                    pad_seeds([np.concatenate([p[i] for p in s[g]]) for s in by_seed.values()])
                    for i in (0, 1)
                )
                for g in (*GROUPS, *(SHADOW + g for g in GROUPS))
            }
            rows.append(
                ArmTrace(
                    arm=arm,
                    lag=lag,
                    seeds=tuple(by_seed),
                    tokens={g: int(np.nansum(cells[g][1])) for g in GROUPS},
                    after={g: ratio_of_means(*cells[g], **boot) for g in GROUPS},
                    contrast=ratio_difference(cells[CLIPPED], cells[UNCLIPPED], **boot),
                    shadow_contrast=ratio_difference(
                        cells[SHADOW + CLIPPED], cells[SHADOW + UNCLIPPED], **boot
                    ),
                )
            )
    return rows


def sweep_trace_table(rows: Sequence[ArmTrace]) -> str:
    """The rows as a Markdown table (log-prob changes in nats); the BF16-shadow columns only
    where some run traced the shadow."""
    shadow = any(math.isfinite(r.shadow_contrast.estimate) for r in rows)
    head = [
        "Log-prob change of step s's tokens from the end of step s's updates to the policy "
        "after step t (lag t - s), mean over each group's tokens, all traced dumps of that lag "
        "pooled over seeds; 90% bootstrap over seeds and rows; the contrast is A<0 clipped "
        "minus A<0 not clipped over the same rows, with each seed's value"
        + (", in the trainer's precision and in the BF16 shadow." if shadow else "."),
        "",
        "| arm | lag | seeds | tokens (clipped / not / A>0) | "
        + " | ".join(GROUPS)
        + " | clipped - not clipped | per seed |"
        + (" the same, BF16 shadow | per seed |" if shadow else ""),
        "|---|---|---|---|" + "---|" * len(GROUPS) + "---|---|" + ("---|---|" if shadow else ""),
    ]
    for r in rows:
        tokens = " / ".join(str(r.tokens[g]) for g in GROUPS)
        groups = " | ".join(r.after[g].fmt(digits=2) for g in GROUPS)
        contrasts = " | ".join(
            f"{c.fmt(digits=2)} | {c.fmt_per_seed(digits=2, labels=r.seeds)}"
            for c in ((r.contrast, r.shadow_contrast) if shadow else (r.contrast,))
        )
        lag = "all" if r.lag == ALL_LAGS else r.lag
        head.append(f"| {r.arm} | {lag} | {len(r.seeds)} | {tokens} | {groups} | {contrasts} |")
    return "\n".join(head)
