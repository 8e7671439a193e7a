"""What put a seeded sweep's A<0 tokens below the lower clip bound: the trainer's precision, or a
move of the policy its BF16 shadow sees as well.

Every ratio dump holds, for the same tokens, the trainer's ratio r (at the end of the step's
updates, against the old policy in the same precision) and the BF16 shadow's r_ref. For the A<0
tokens the trainer put below the step's lower bound (the bound its metrics row logged), per arm
over all its dumps and seeds: their mean log r, the shadow's mean log r_ref on the same tokens,
and the share of them the shadow puts below the bound too. Where log r_ref is near 0, the policy
did not move those tokens: the clip is the precision's noise.

Over all A<0 tokens, a token's distance from r = 1 has two sources: the policy's move, which the
shadow sees (log r_ref), and the precision's noise (log r - log r_ref). Their root mean squares
and the noise's share of the two say which of them decides what the bound clips: noise above the
move means a token's clip is mostly noise. Intervals resample seeds, then rows (`analysis.paired`,
blocks of one row), with each seed's value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from calclip_jax.analysis.clipped_trace import (
    CLIPPED,
    UNCLIPPED,
    row_sums,
    step_log_ratio,
    token_groups,
)
from calclip_jax.analysis.paired import N_BOOT, Interval, pad_seeds, ratio_of_means
from calclip_jax.reports.clipped_trace import lower_bounds
from calclip_jax.workdir.ratio_dumps import dump_steps, load_dump
from calclip_jax.workdir.run_record import find_arms
from calclip_jax.workdir.seed_names import split_seeded_name

CLIPPED_MEASURES = ("log_r", "shadow_log_r", "shadow_clipped")  # over the clipped A<0 tokens
SPREAD_MEASURES = ("noise_sq", "move_sq")  # over all A<0 tokens: squared noise, squared move
MEASURES = CLIPPED_MEASURES + SPREAD_MEASURES


@dataclasses.dataclass(frozen=True)
class ClipOrigin:
    """One arm's clipped A<0 tokens, over its seeds' ratio dumps."""

    arm: str
    seeds: tuple[int, ...]
    tokens: int
    log_r: Interval  # the trainer's mean log r
    shadow_log_r: Interval  # the shadow's mean log r_ref on the same tokens
    shadow_clipped: Interval  # share the shadow puts below the bound too
    noise_rms: Interval  # all A<0 tokens: root mean square of log r - log r_ref
    move_rms: Interval  # all A<0 tokens: root mean square of log r_ref
    noise_to_move: Interval  # noise_rms / move_rms (1: noise as large as the move)


def _run_rows(workdir: Path, last_step: int | None) -> dict[str, list[np.ndarray]] | None:
    """Per measure, [num, den] row sums over the run's dumps through `last_step` (None: no dump
    with ratio_ref)."""
    dumps = dump_steps(workdir, last_step)
    bounds = lower_bounds(workdir, sorted(dumps)) if dumps else {}
    parts: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {m: [] for m in MEASURES}
    for s, path in dumps.items():
        d = load_dump(path)
        if "ratio_ref" not in d:
            continue
        groups = token_groups(d["ratio"], d["advantages"], d["mask"], bounds[s])
        clipped, negative = groups[CLIPPED], groups[CLIPPED] | groups[UNCLIPPED]
        below = (d["ratio_ref"] < bounds[s]).astype(np.float64)
        log_r, log_r_ref = step_log_ratio(d["ratio"]), step_log_ratio(d["ratio_ref"])
        for m, v in zip(CLIPPED_MEASURES, (log_r, log_r_ref, below), strict=True):
            parts[m].append(row_sums(v, clipped))
        for m, v in zip(SPREAD_MEASURES, ((log_r - log_r_ref) ** 2, log_r_ref**2), strict=True):
            parts[m].append(row_sums(v, negative))
    if not parts[MEASURES[0]]:
        return None
    return {m: [np.concatenate([p[i] for p in parts[m]]) for i in (0, 1)] for m in MEASURES}


def clip_origins(
    sweep_dir: str | Path, n_boot: int = N_BOOT, seed: int = 0, last_step: int | None = None
) -> list[ClipOrigin]:
    """Each arm with ratio dumps (through `last_step`), by name; its seeds are the runs that
    dumped."""
    found: dict[str, dict[int, dict[str, list[np.ndarray]]]] = {}
    for name, workdir in find_arms(sweep_dir).items():
        rows = _run_rows(workdir, last_step)
        if rows is not None:
            arm, k = split_seeded_name(name)
            found.setdefault(arm, {})[k or 0] = rows
    boot = {"n_boot": n_boot, "block": 1, "seed": seed}
    out = []
    for arm in sorted(found):
        by_seed = dict(sorted(found[arm].items()))
        cells = {
            m: [pad_seeds([r[m][i] for r in by_seed.values()]) for i in (0, 1)] for m in MEASURES
        }
        means = {m: ratio_of_means(*cells[m], **boot) for m in CLIPPED_MEASURES}
        noise, move = (ratio_of_means(*cells[m], **boot) for m in SPREAD_MEASURES)
        # same tokens in both: the ratio of their sums of squares is that of their mean squares
        share = ratio_of_means(cells["noise_sq"][0], cells["move_sq"][0], **boot)
        tokens = int(np.nansum(cells[CLIPPED_MEASURES[0]][1]))
        spread = {"noise_rms": _sqrt(noise), "move_rms": _sqrt(move), "noise_to_move": _sqrt(share)}
        out.append(ClipOrigin(arm, tuple(by_seed), tokens, **means, **spread))
    return out


def _sqrt(iv: Interval) -> Interval:
    """The interval of a mean square as one of its root (monotone, so the bounds carry over)."""
    root = lambda v: float(np.sqrt(v))
    return dataclasses.replace(
        iv,
        estimate=root(iv.estimate),
        low=root(iv.low),
        high=root(iv.high),
        per_seed=tuple(root(v) for v in iv.per_seed),
    )


def clip_origin_table(rows: Sequence[ClipOrigin]) -> str:
    """The rows as a Markdown table."""
    lines = [
        "A<0 tokens the trainer put below the lower bound, over every ratio dump: the trainer's "
        "mean log r, the BF16 shadow's on the same tokens, and the share the shadow also puts "
        "below the bound; 90% bootstrap over seeds and rows, each seed's value after it.",
        "",
        "| arm | seeds | tokens | trainer log r | shadow log r, same tokens | also below in the "
        "shadow (%) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = [
            f"{iv.fmt(scale=scale, digits=d)} ({iv.fmt_per_seed(scale=scale, digits=d)})"
            for iv, scale, d in (
                (r.log_r, 1, 2),
                (r.shadow_log_r, 1, 2),
                (r.shadow_clipped, 100, 3),
            )
        ]
        lines.append(f"| {r.arm} | {len(r.seeds)} | {r.tokens} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "All A<0 tokens: what moved them from r = 1, in nats (root mean square): the policy's move "
        "(the shadow's log r_ref) and the precision's noise (log r - log r_ref); noise / move "
        "above 1 means the noise decides which tokens cross the bound.",
        "",
        "| arm | seeds | policy move | precision noise | noise / move |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        cells = [
            f"{iv.fmt(digits=2)} ({iv.fmt_per_seed(digits=2)})"
            for iv in (r.move_rms, r.noise_rms, r.noise_to_move)
        ]
        lines.append(f"| {r.arm} | {len(r.seeds)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
