"""Where a `worked_addition` sweep's policy is uncertain: surprisal per token role, per arm.

A sampled token's surprisal, -log p under the policy that sampled it (the dump's `old_logp_full`:
theta_old in the trainer's precision), is an unbiased estimate of that position's entropy. Split
by role (`column_working.token_roles`: the working's digits, the result's digits, everything
else) it tells which part of a response carries a rise in the logged entropy: the working, which
the reward ignores, or the result it scores.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from calclip_jax.data.tasks.column_working import ROLES, token_roles
from calclip_jax.probes.eval_checkpoint import run_spec_of
from calclip_jax.reports.paired_arms import markdown_table
from calclip_jax.workdir.ratio_dumps import dump_rows, dump_steps, load_dump
from calclip_jax.workdir.run_record import read_arms_by_seed

Totals = dict[str, tuple[float, int]]  # role -> (summed surprisal in nats, tokens)
Surprisal = dict[str, dict[int, dict[int, Totals]]]  # arm -> seed -> dump step -> totals


def batch_totals(pieces: Sequence[Sequence[str]], logps: Sequence[np.ndarray]) -> Totals:
    """Per role, the summed surprisal and the token count over a batch's responses (each given as
    its tokens' texts and their log-probs)."""
    sums = {role: 0.0 for role in ROLES}
    counts = {role: 0 for role in ROLES}
    for texts, logp in zip(pieces, logps, strict=True):
        for role, value in zip(token_roles(texts), np.asarray(logp, np.float64), strict=True):
            sums[role] -= float(value)
            counts[role] += 1
    return {role: (sums[role], counts[role]) for role in ROLES}


def run_surprisal(workdir: str | Path, last_step: int | None = None) -> dict[int, Totals]:
    """Dump step -> `batch_totals` of that step's batch, for one run's dumps through
    `last_step` (empty without dumps)."""
    steps = dump_steps(workdir, last_step)
    if not steps:
        return {}
    tokenizer = run_spec_of(workdir).tokenizer
    out = {}
    for step, path in sorted(steps.items()):
        rows, logp = dump_rows(path), load_dump(path)["old_logp_full"]
        if rows is None:
            continue  # written before dumps kept the token ids
        mask = rows["response_mask"] > 0
        pieces = [
            [tokenizer.decode([int(t)]) for t in ids[m]]
            for ids, m in zip(rows["tokens"], mask, strict=True)
        ]
        out[step] = batch_totals(pieces, [lp[m] for lp, m in zip(logp, mask, strict=True)])
    return out


def sweep_surprisal(sweep_dir: str | Path, last_step: int | None = None) -> Surprisal:
    """`run_surprisal` of every run under `sweep_dir` that dumped, by arm and seed."""
    return read_arms_by_seed(sweep_dir, functools.partial(run_surprisal, last_step=last_step))


def summed(
    by_seed: dict[int, dict[int, Totals]], steps: Mapping[int, Sequence[int]], role: str
) -> tuple[float, int]:
    """`role`'s summed surprisal and token count over each seed's `steps`."""
    cells = [by_seed[s][t][role] for s in by_seed for t in steps.get(s, ()) if t in by_seed[s]]
    return sum(v for v, _ in cells), sum(n for _, n in cells)


def mean(total: tuple[float, int]) -> float:
    """Nats a token of a `summed` total (NaN without tokens)."""
    return total[0] / total[1] if total[1] else float("nan")


def halves(steps: Mapping[int, Sequence[int]]) -> tuple[dict[int, list[int]], ...]:
    """Each seed's steps split at their middle: (first halves, second halves)."""
    early = {s: list(t[: len(t) // 2]) for s, t in steps.items()}
    return early, {s: list(t[len(t) // 2 :]) for s, t in steps.items()}


def span(half: Mapping[int, Sequence[int]]) -> str:
    """'steps a-b', or each seed's where they differ ('steps 5-40 (seed 0), 5-35 (seed 1)')."""
    spans = {s: f"{t[0]}-{t[-1]}" for s, t in half.items() if t}
    if len(set(spans.values())) == 1:
        return f"steps {next(iter(spans.values()))}"
    return "steps " + ", ".join(f"{v} (seed {s})" for s, v in spans.items())


def surprisal_report(surprisal: Surprisal, steps: Mapping[int, Sequence[int]]) -> str:
    """Markdown: per arm and role, the mean surprisal over the first and the second half of each
    seed's `steps` (the dump steps its arms share) and each role's share of all the late half's."""
    if not any(steps.values()):
        return "No dump step is shared by a seed's runs.\n"
    early, late = halves(steps)
    rows = []
    for arm, by_seed in sorted(surprisal.items()):
        late_sums = {role: summed(by_seed, late, role) for role in ROLES}
        late_total = sum(v for v, _ in late_sums.values())
        for role in ROLES:
            share = late_sums[role][0] / late_total if late_total > 0 else float("nan")
            early_mean = mean(summed(by_seed, early, role))
            late_mean = mean(late_sums[role])
            rows.append([arm, role, f"{early_mean:.3f}", f"{late_mean:.3f}", f"{100 * share:.0f}"])
    header = [
        "arm",
        "tokens",
        f"nats a token, {span(early)}" if any(early.values()) else "nats a token, early",
        f"nats a token, {span(late)}",
        "% of the late surprisal",
    ]
    return (
        "### Surprisal by token role (-log p of the sampled token at theta_old)\n\n"
        + markdown_table(header, rows)
        + "\n"
    )
