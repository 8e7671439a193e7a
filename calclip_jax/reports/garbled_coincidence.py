"""Do arms garble at the same RL steps, and on the same prompts? A seeded sweep's pairs of arms.

    <sweep>/<arm>__seed<k>/metrics.jsonl    garbled_frac at every RL step
    <sweep>/<arm>__seed<k>/ratios/          the whole batch at each dump step (`log.ratios_every`)

Per seed and pair of arms: the steps where both arms' garbled share exceeds a threshold, against
circular shifts of one arm's series; then, at the dump steps both runs hold, the prompts with an
unfinished (garbled) response in both, against random prompts (`analysis.coincidence`); each p
beside its Holm adjustment over all the table's tests (`analysis.multiplicity`). A coincidence in
steps that does not recur in prompts points to chance or to the batch as a whole, not to
particular prompts.
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import numpy as np

from calclip_jax.analysis.coincidence import Coincidence, prompt_coincidence, spike_coincidence
from calclip_jax.analysis.multiplicity import holm
from calclip_jax.probes.dump_responses import decode_dump
from calclip_jax.probes.eval_checkpoint import run_spec_of
from calclip_jax.reports.metrics import load_columns
from calclip_jax.reports.paired_arms import markdown_table
from calclip_jax.workdir.ratio_dumps import dump_steps
from calclip_jax.workdir.run_record import read_arms_by_seed

METRIC = "garbled_frac"
Batch = tuple[frozenset[str], frozenset[str]]  # (the step's prompts, those with a cut response)


@dataclasses.dataclass(frozen=True)
class GarbledRun:
    """One run's garbled share per RL step, and per dump step its batch's prompts and those of
    them with an unfinished response."""

    share: dict[int, float]
    batches: dict[int, Batch]


def load_run(workdir: str | Path, last_step: int | None = None) -> GarbledRun:
    """A run's `GarbledRun`: its metrics and its decoded ratio dumps (through `last_step`)."""
    cols = load_columns(workdir, last_step)
    steps = cols.get("step", np.zeros(0, np.int64)).astype(np.int64)
    values = cols.get(METRIC, np.full(steps.shape, np.nan)).astype(np.float64)
    batches: dict[int, Batch] = {}
    dumps = dump_steps(workdir, last_step)
    if dumps:
        tokenizer = run_spec_of(workdir).tokenizer
        for step, path in sorted(dumps.items()):
            rows = decode_dump(path, tokenizer)
            cut = frozenset(r.prompt for r in rows if not r.finished)
            batches[step] = (frozenset(r.prompt for r in rows), cut)
    return GarbledRun(dict(zip(steps.tolist(), values.tolist(), strict=True)), batches)


Sweep = dict[str, dict[int, GarbledRun]]  # arm -> seed -> run


def load_sweep(sweep_dir: str | Path, last_step: int | None = None) -> Sweep:
    """Every run under `sweep_dir`, by arm and seed, each through `last_step`."""
    return read_arms_by_seed(sweep_dir, lambda path: load_run(path, last_step))


def arms_of_seed(sweep: Sweep) -> dict[int, list[str]]:
    """Seed -> the arms that ran it, sorted."""
    seeds = sorted(set().union(*sweep.values()))
    return {seed: sorted(a for a in sweep if seed in sweep[a]) for seed in seeds}


def step_coincidence(a: GarbledRun, b: GarbledRun, threshold: float) -> Coincidence:
    """`spike_coincidence` of the two runs' garbled shares over the RL steps both logged."""
    steps = sorted(set(a.share) & set(b.share))
    x = np.array([a.share[s] for s in steps], np.float64)
    y = np.array([b.share[s] for s in steps], np.float64)
    return spike_coincidence(x, y, threshold)


def batch_coincidence(a: GarbledRun, b: GarbledRun) -> Coincidence:
    """`prompt_coincidence` over the dump steps both runs hold; raises where the two batches'
    prompts differ (the arms do not share prompts, so nothing pairs)."""
    steps = []
    for step in sorted(set(a.batches) & set(b.batches)):
        (prompts_a, cut_a), (prompts_b, cut_b) = a.batches[step], b.batches[step]
        if prompts_a != prompts_b:
            raise ValueError(f"the two runs' batches at RL step {step} hold different prompts")
        steps.append((len(prompts_a), set(cut_a), set(cut_b)))
    return prompt_coincidence(steps)


PairTests = tuple[int, str, str, Coincidence, Coincidence]  # seed, arms, steps and prompts tests


def pair_tests(sweep: Sweep, threshold: float) -> list[PairTests]:
    """Per seed and pair of arms: the steps test and the prompts test."""
    out = []
    for seed, arms in arms_of_seed(sweep).items():
        for x, y in itertools.combinations(arms, 2):
            a, b = sweep[x][seed], sweep[y][seed]
            out.append((seed, x, y, step_coincidence(a, b, threshold), batch_coincidence(a, b)))
    return out


def p_values(tests: list[PairTests]) -> list[float]:
    """The raw p of every test, row by row, the steps test before the prompts test."""
    return [c.p_value for *_, steps, prompts in tests for c in (steps, prompts)]


def _p(value: float) -> str:
    return "n/a" if np.isnan(value) else f"{value:.2f}"


def _cells(c: Coincidence, adjusted: float) -> list[str]:
    counts = [f"{c.hits[0]} / {c.hits[1]}", str(c.shared), f"{c.expected:.2f}"]
    return [*counts, _p(c.p_value), _p(adjusted)]


def coincidence_rows(tests: list[PairTests]) -> list[list[str]]:
    """One row per pair of arms: steps, both tests' cells with p and Holm's p. Holm's adjustment
    takes every test of the table (two a row) as one family."""
    adjusted = holm(p_values(tests))
    return [
        [
            str(seed),
            f"`{x}` / `{y}`",
            str(steps.units),
            *_cells(steps, adjusted[2 * i]),
            *_cells(prompts, adjusted[2 * i + 1]),
        ]
        for i, (seed, x, y, steps, prompts) in enumerate(tests)
    ]


def coincidence_report(sweep: Sweep, threshold: float) -> str:
    """The table as Markdown, with what its columns are."""
    tests = pair_tests(sweep, threshold)
    n_tests = int(np.isfinite(p_values(tests)).sum())
    header = ["seed", "arms", "steps", "spike steps", "in both", "expected", "p", "Holm p"]
    header += ["cut prompts", "in both", "expected", "p", "Holm p"]
    legend = (
        f"Spike steps: RL steps whose garbled share exceeds {threshold:g}, in each arm. In both:"
        " steps where both spike. Expected: the mean count over every other circular shift of the"
        " second arm's series; p: the share of all shifts, this one included, with a count >= in"
        " both (at least 1 / steps). Cut prompts: at the ratio dumps both"
        " runs hold, the prompts with an unfinished response (each step's prompt counted once),"
        " in each arm. In both: prompts cut in both at the same step. Expected and p: each arm's"
        " cut prompts drawn at random among the step's prompts (exact). Holm p: p adjusted for"
        f" the table's {n_tests} tests (Holm's step-down method): taking those at or below 0.05"
        " as coincidences keeps the chance of any false one in the table at or below 5%."
    )
    table = markdown_table(header, coincidence_rows(tests))
    return f"### Garbled steps and garbled prompts, per pair of arms\n\n{legend}\n\n{table}\n"
