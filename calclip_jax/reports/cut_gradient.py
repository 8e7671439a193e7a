"""What gradient each arm's cut responses get: a seeded sweep's ratio dumps.

    <sweep>/<arm>__seed<k>/ratios/step_XXXXXX.npz   (`log.ratios_every`: the whole batch)

Per arm, pooled over its seeds' dump steps (`analysis.cut_gradient` per dump): the share of
responses cut at the token cap, the share of those with advantage 0 (no gradient whatever the
clip), and the share of A < 0 tokens below the lower clip bound in cut and in finished responses,
with their difference. Intervals resample seeds, then dump steps (`analysis.paired`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from calclip_jax.analysis.cut_gradient import CutCounts, cut_counts
from calclip_jax.analysis.paired import pad_seeds, ratio_difference, ratio_of_means
from calclip_jax.probes.dump_responses import decode_dump
from calclip_jax.probes.eval_checkpoint import run_spec_of
from calclip_jax.reports.clipped_trace import lower_bounds
from calclip_jax.reports.paired_arms import markdown_table, steps_label
from calclip_jax.workdir.ratio_dumps import dump_steps, load_dump
from calclip_jax.workdir.run_record import read_arms_by_seed

RunCounts = dict[int, CutCounts]  # dump step -> counts
Sweep = dict[str, dict[int, RunCounts]]  # arm -> seed -> run


def load_run(workdir: str | Path, last_step: int | None = None) -> RunCounts:
    """A run's `CutCounts` at each of its dump steps through `last_step`, each dump against the
    lower bound its step logged (`reports.clipped_trace.lower_bounds`)."""
    dumps = dump_steps(workdir, last_step)
    if not dumps:
        return {}
    tokenizer = run_spec_of(workdir).tokenizer
    bounds = lower_bounds(workdir, sorted(dumps))
    out = {}
    for step, path in sorted(dumps.items()):
        finished = np.array([r.finished for r in decode_dump(path, tokenizer)], bool)
        d = load_dump(path)
        out[step] = cut_counts(finished, d["ratio"], d["advantages"], d["mask"], bounds[step])
    return out


def load_sweep(sweep_dir: str | Path, last_step: int | None = None) -> Sweep:
    """Every run under `sweep_dir` that holds a dump, by arm and seed, each through `last_step`."""
    return read_arms_by_seed(sweep_dir, lambda path: load_run(path, last_step))


def counts_matrix(by_seed: dict[int, RunCounts], field: str, side: int) -> np.ndarray:
    """[seeds, dump steps] float64 of one `CutCounts` field's cut (side 0) or finished (1)
    count, each seed's dumps left-aligned and NaN-padded."""
    return pad_seeds(
        [
            np.array([getattr(c, field)[side] for _, c in sorted(run.items())], np.float64)
            for _, run in sorted(by_seed.items())
        ]
    )


def cut_rows(sweep: Sweep, **boot: Any) -> list[list[str]]:
    """One row per arm: seeds x dumps, responses, cut share, A = 0 share of the cut, clipped
    share of A < 0 tokens in cut and finished responses and their difference (percent, 90%)."""
    rows = []
    for arm, by_seed in sorted(sweep.items()):
        m = {
            (field, side): counts_matrix(by_seed, field, side)
            for field in ("rows", "zero_rows", "neg_tokens", "clipped_tokens")
            for side in (0, 1)
        }
        cut, fin = m["rows", 0], m["rows", 1]
        clipped_cut = (m["clipped_tokens", 0], m["neg_tokens", 0])
        clipped_fin = (m["clipped_tokens", 1], m["neg_tokens", 1])
        rows.append(
            [
                arm,
                f"{len(by_seed)} x {steps_label([len(r) for _, r in sorted(by_seed.items())])}",
                f"{int(np.nansum(cut))} of {int(np.nansum(cut + fin))}",
                ratio_of_means(cut, cut + fin, **boot).fmt(scale=100, digits=2),
                ratio_of_means(m["zero_rows", 0], cut, **boot).fmt(scale=100, digits=2),
                ratio_of_means(*clipped_cut, **boot).fmt(scale=100, digits=2),
                ratio_of_means(*clipped_fin, **boot).fmt(scale=100, digits=2),
                ratio_difference(clipped_cut, clipped_fin, **boot).fmt(scale=100, digits=2),
            ]
        )
    return rows


def cut_report(sweep: Sweep, **boot: Any) -> str:
    """The table as Markdown, with what its columns are."""
    header = ["arm", "seeds x dumps", "cut responses", "cut, %", "cut with A = 0, %"]
    header += ["A<0 clipped: cut, %", "finished, %", "cut - finished, points"]
    legend = (
        "Over every ratio dump of each arm's runs: responses cut at the token cap (unfinished:"
        " garbled to the verifier) among all; those of them whose advantage is 0 (their group"
        " scored alike: no gradient whatever the clip bounds); the share of A < 0 response tokens"
        " whose ratio after the step's updates lies below the step's lower clip bound (gradient"
        " gone), in cut and in finished responses, and the difference. Brackets: 90% bootstrap"
        " intervals over seeds, then dump steps."
    )
    table = markdown_table(header, cut_rows(sweep, **boot))
    return f"### What gradient the cut responses get\n\n{legend}\n\n{table}\n"
