"""How much of each arm's sampled working is right, over RL steps: a seeded `worked_addition`
sweep's ratio dumps graded by `data.tasks.column_working`.

    <sweep>/<arm>__seed<k>/ratios/step_XXXXXX.npz   (`log.ratios_every`: the whole batch)

Per dump, the share of the batch's responses with each `WorkingCheck` field true, of those
whose sum carries, the share with a carry left out (`CARRY`), and of those that write a column's
digit, the share with one not its total's (`WRITTEN`). The arms of a seed see the same prompts at
each step, so arms are compared paired over (seed, dump step): intervals resample seeds, then dump
steps (`analysis.paired`). Each seed counts the dump steps all its runs hold (a seed cut short
does not cut the others); a "late half" is each seed's own.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from calclip_jax.analysis.paired import (
    mean_interval,
    pad_seeds,
    paired_difference,
    ratio_difference,
    ratio_of_means,
    second_halves,
)
from calclip_jax.analysis.stats import finite_mean
from calclip_jax.data.tasks.column_working import (
    FIELDS,
    carry_left_out,
    check_working,
    operands,
    pass_rates,
    written_digit_wrong,
)
from calclip_jax.probes.dump_responses import DumpedResponse, decode_dump
from calclip_jax.probes.eval_checkpoint import run_spec_of
from calclip_jax.reports.paired_arms import markdown_table, steps_label
from calclip_jax.workdir.ratio_dumps import dump_steps
from calclip_jax.workdir.run_record import read_arms_by_seed

Shares = dict[str, float]  # WorkingCheck field (and JOINT, CARRY, WRITTEN) -> share of a batch
Fidelity = dict[str, dict[int, dict[int, Shares]]]  # arm -> seed -> dump step -> shares
PerDump = Mapping[str, Mapping[int, Mapping[int, object]]]  # any arm -> seed -> dump step -> value

JOINT = "result_and_columns_right"  # share with both: what "does right working pay?" reads
CARRY = "carry_left_out"  # share of the responses whose sum carries (`carry_left_out`)
WRITTEN = "written_digit_wrong"  # share of the responses that write a digit (`written_digit_wrong`)
REPORTED = (*FIELDS, CARRY, WRITTEN)  # the tables' and the figure's rows, in order
LABELS = {
    "result_right": "result right",
    "all_columns": "every column written",
    "columns_right": "columns sum the right digits",
    "sums_true": "column sums true",
    "exact": "working as demonstrated",
    CARRY: "carry left out (sums that carry)",
    WRITTEN: "a digit written not its sum's (responses writing one)",
}


def batch_shares(responses: Sequence[DumpedResponse]) -> Shares:
    """Each field's share among the responses whose prompt poses a sum, `JOINT`'s, `CARRY`'s among
    those whose sum carries and `WRITTEN`'s among those that write a digit (NaN where none)."""
    posed = [
        (numbers, r.response)
        for r in responses
        if (numbers := operands(r.prompt)) is not None and len(numbers) >= 2
    ]
    checks = [check_working(numbers, text) for numbers, text in posed]
    left_out = [carry_left_out(numbers, text) for numbers, text in posed]
    wrong_digit = [written_digit_wrong(text) for _, text in posed]
    return {
        **pass_rates(checks),
        JOINT: finite_mean([c.result_right and c.columns_right for c in checks], math.nan),
        CARRY: finite_mean([c for c in left_out if c is not None], math.nan),
        WRITTEN: finite_mean([w for w in wrong_digit if w is not None], math.nan),
    }


def run_fidelity(workdir: str | Path, last_step: int | None = None) -> dict[int, Shares]:
    """Dump step -> `batch_shares` of that step's batch, for one run's dumps through `last_step`
    (empty without dumps)."""
    steps = dump_steps(workdir, last_step)
    if not steps:
        return {}
    tokenizer = run_spec_of(workdir).tokenizer
    return {
        step: batch_shares(decode_dump(path, tokenizer)) for step, path in sorted(steps.items())
    }


def sweep_fidelity(sweep_dir: str | Path, last_step: int | None = None) -> Fidelity:
    """`run_fidelity` of every run under `sweep_dir` that dumped, by arm and seed."""
    return read_arms_by_seed(sweep_dir, functools.partial(run_fidelity, last_step=last_step))


def shared_steps(fidelity: PerDump, arms: Sequence[str], seeds: Sequence[int]) -> list[int]:
    """The dump steps every run of `arms` among `seeds` holds: where arms pair."""
    sets = [set(fidelity[a][s]) for a in arms for s in seeds if s in fidelity[a]]
    return sorted(set.intersection(*sets)) if sets else []


def seed_steps(fidelity: PerDump) -> dict[int, list[int]]:
    """Seed -> the dump steps every run of that seed holds: what its arms compare over."""
    seeds = sorted(set().union(*fidelity.values()))
    return {s: shared_steps(fidelity, list(fidelity), [s]) for s in seeds}


def matrix(
    fidelity: Fidelity,
    arm: str,
    seeds: Sequence[int],
    steps: Mapping[int, Sequence[int]],
    field: str,
) -> np.ndarray:
    """[len(seeds), most steps] of one field's share, each seed over its own `steps`, NaN-padded."""
    return pad_seeds(
        [np.array([fidelity[arm][s][t][field] for t in steps[s]], np.float64) for s in seeds]
    )


def late_half(
    x: np.ndarray, seeds: Sequence[int], steps: Mapping[int, Sequence[int]]
) -> np.ndarray:
    """Each row of a `matrix` cut to its seed's second half of steps, left-aligned."""
    return second_halves(x, [len(steps[s]) for s in seeds])


def fidelity_rows(fidelity: Fidelity, baseline: str | None = None, **boot: Any) -> list[list[str]]:
    """Rows "arm, field, mean share [90%], the same over the late half, minus the baseline over
    the late half [90%], seeds x dump steps" (percent), each seed over the dump steps all its runs
    share (so the rows compare), the late half its second half."""
    steps = seed_steps(fidelity)
    if not any(steps.values()):
        return []
    rows = []
    for arm in sorted(fidelity):
        seeds = sorted(fidelity[arm])
        paired = sorted(set(seeds) & set(fidelity.get(baseline, {}))) if baseline != arm else []
        for field in REPORTED:
            x = matrix(fidelity, arm, seeds, steps, field)
            diff = "-"
            if paired:
                a, b = (
                    late_half(matrix(fidelity, k, paired, steps, field), paired, steps)
                    for k in (arm, baseline)
                )
                diff = paired_difference(a, b, **boot).fmt(scale=100, digits=2)
            rows.append(
                [
                    arm,
                    LABELS[field],
                    mean_interval(x, **boot).fmt(scale=100, digits=2),
                    mean_interval(late_half(x, seeds, steps), **boot).fmt(scale=100, digits=2),
                    diff,
                    f"{len(seeds)} x {steps_label([len(steps[s]) for s in seeds])}",
                ]
            )
    return rows


def payoff_rows(fidelity: Fidelity, **boot: Any) -> list[list[str]]:
    """Rows "arm, P(result right | columns right), P(result right | not), their difference [90%],
    share with the columns right" (percent), each seed over the dump steps all its runs share:
    whether right working earns reward, which is what lets the policy keep it."""
    steps = seed_steps(fidelity)
    rows = []
    for arm in sorted(fidelity) if any(steps.values()) else []:
        seeds = sorted(fidelity[arm])
        joint, cols, result = (
            matrix(fidelity, arm, seeds, steps, k) for k in (JOINT, "columns_right", "result_right")
        )
        right, wrong = (joint, cols), (result - joint, 1.0 - cols)
        rows.append(
            [
                arm,
                ratio_of_means(*right, **boot).fmt(scale=100, digits=2),
                ratio_of_means(*wrong, **boot).fmt(scale=100, digits=2),
                ratio_difference(right, wrong, **boot).fmt(scale=100, digits=2),
                mean_interval(cols, **boot).fmt(scale=100, digits=2),
            ]
        )
    return rows


def seed_means(fidelity: Fidelity) -> dict[str, dict[int, Shares]]:
    """arm -> dump step -> each field's share averaged over the seeds that dumped there."""
    out: dict[str, dict[int, Shares]] = {}
    for arm, by_seed in sorted(fidelity.items()):
        for step in sorted(set().union(*(set(v) for v in by_seed.values()))):
            at = [v[step] for v in by_seed.values() if step in v]
            out.setdefault(arm, {})[step] = {
                f: finite_mean([a[f] for a in at], math.nan) for f in REPORTED
            }
    return out


def percent(value: float) -> str:
    """A share as a whole percent, "-" where it is NaN (no response it counts)."""
    return f"{100 * value:.0f}" if np.isfinite(value) else "-"


def per_step_rows(fidelity: Fidelity) -> list[list[str]]:
    """Rows "dump step, arm, each field's share (`seed_means`, percent)", by step then arm."""
    rows = [
        [str(step), arm] + [percent(shares[f]) for f in REPORTED]
        for arm, by_step in seed_means(fidelity).items()
        for step, shares in by_step.items()
    ]
    return sorted(rows, key=lambda r: (int(r[0]), r[1]))


def steps_span(steps: Mapping[int, Sequence[int]]) -> str:
    """The dump steps the tables read, with where their late half starts: one span for all runs
    when the seeds agree, else each seed's."""
    spans = {s: f"{t[0]}-{t[-1]}, late half from {t[len(t) // 2]}" for s, t in steps.items() if t}
    if not spans:
        return "no dump step shared by a seed's runs"
    if len(set(spans.values())) == 1 and len(spans) == len(steps):
        return f"the dump steps {next(iter(spans.values()))} (all runs)"
    return "each seed's dump steps (" + "; ".join(f"seed {s}: {v}" for s, v in spans.items()) + ")"


def fidelity_report(fidelity: Fidelity, baseline: str | None = None, **boot: Any) -> str:
    """Markdown: the pooled table (`fidelity_rows`), then the per-step one."""
    rows = fidelity_rows(fidelity, baseline, **boot)
    span = steps_span(seed_steps(fidelity))
    pooled = markdown_table(
        [
            "arm",
            "response",
            "share, % [90%]",
            "late half, %",
            f"late half minus {baseline or 'baseline'}, points",
            "seeds x dump steps",
        ],
        rows,
    )
    per_step = markdown_table(
        ["step", "arm"] + [LABELS[f] for f in REPORTED], per_step_rows(fidelity)
    )
    payoff = markdown_table(
        [
            "arm",
            "result right if the columns are, %",
            "if not, %",
            "difference, points",
            "columns right, %",
        ],
        payoff_rows(fidelity, **boot),
    )
    return (
        f"Over {span}:\n\n{pooled}\n\n"
        f"Does right working pay? Over the same dumps:\n\n{payoff}\n\n"
        f"Per dump step (percent of the batch; mean over seeds):\n\n{per_step}\n"
    )
