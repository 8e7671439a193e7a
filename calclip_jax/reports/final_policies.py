"""Final policies scored alike: each arm's greedy accuracy on the same test prompts, paired per
prompt against a baseline arm.

Reads the JSON lines `experiments.evaluate --json` appends (one per scored checkpoint, with
`greedy_correct`: each prompt's verdict in the split's order). Arms of one seed answer the same
prompts, so "arm - baseline" is taken per (seed, prompt); its interval resamples seeds and,
inside each, prompts (`analysis.paired` with blocks of one: prompts are independent draws); with
a few seeds the t interval over the seeds' own differences stands beside it (`seed_mean_cell`).
A prompt both arms answer alike adds nothing to the difference, which is why the paired interval
is narrower than two accuracies' standard errors would suggest.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from calclip_jax.analysis.paired import mean_interval, paired_difference
from calclip_jax.reports.paired_arms import markdown_table, seed_mean_cell
from calclip_jax.workdir.seed_names import split_seeded_name

Scores = dict[str, dict[int, np.ndarray]]  # arm -> seed -> [prompts] of 0/1
SETTING = ("step", "split", "num_prompts", "precision")  # what arms must share to be paired


def load_scores(path: str | Path) -> tuple[Scores, dict[str, Any]]:
    """(arm -> seed -> per-prompt verdicts, the setting they share) from an evaluations file.

    A later line for the same run replaces an earlier one; lines without `greedy_correct`
    (written before it existed) are left out. ValueError when the kept lines differ in step,
    split, prompt count or precision: such scores do not pair."""
    latest: dict[str, dict[str, Any]] = {}
    for line in Path(path).read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            if "greedy_correct" in record:
                latest[Path(record["workdir"]).name] = record
    if not latest:
        raise ValueError(f"{path}: no record with per-prompt verdicts (greedy_correct)")
    settings = {name: tuple(r[k] for k in SETTING) for name, r in latest.items()}
    if len(set(settings.values())) > 1:
        listed = ", ".join(
            f"{n}: {dict(zip(SETTING, s, strict=True))}" for n, s in settings.items()
        )
        raise ValueError(f"{path}: runs scored in different settings, not paired: {listed}")
    scores: Scores = {}
    for name, record in latest.items():
        arm, seed = split_seeded_name(name)
        scores.setdefault(arm, {})[seed or 0] = np.asarray(record["greedy_correct"], np.float64)
    return scores, dict(zip(SETTING, next(iter(settings.values())), strict=True))


def _matrix(by_seed: dict[int, np.ndarray], seeds: Sequence[int]) -> np.ndarray:
    return np.stack([by_seed[s] for s in seeds])


def final_policy_rows(scores: Scores, baseline: str, **boot: Any) -> list[list[str]]:
    """Rows "arm, accuracy % [90%], arm - baseline in points [90%], the same over the seeds'
    differences [90% t] (`seed_mean_cell`), each seed's difference, seeds x prompts", the
    baseline first; the difference over the seeds both arms were scored in."""
    if baseline not in scores:
        raise ValueError(f"baseline arm {baseline!r} not among the scored runs: {sorted(scores)}")
    boot = {"block": 1, **boot}
    rows = []
    for arm in [baseline, *sorted(set(scores) - {baseline})]:
        own = sorted(scores[arm])
        accuracy = mean_interval(_matrix(scores[arm], own), **boot).fmt(scale=100.0)
        shared = sorted(set(own) & set(scores[baseline]))
        diff = seed_mean = per_seed = ""
        if arm != baseline and shared:
            got = paired_difference(
                _matrix(scores[arm], shared), _matrix(scores[baseline], shared), **boot
            )
            diff, per_seed = got.fmt(scale=100.0), got.fmt_per_seed(scale=100.0, labels=shared)
            seed_mean = seed_mean_cell(got, scale=100.0)
        size = f"{len(own)} x {scores[arm][own[0]].size}"
        rows.append([arm, accuracy, diff, seed_mean, per_seed, size])
    return rows


def final_policy_report(scores: Scores, setting: dict[str, Any], baseline: str, **boot: Any) -> str:
    """The table as Markdown under a heading that says what was scored and how."""
    return "\n\n".join(
        [
            f"### Final policies scored alike, paired per prompt against `{baseline}`",
            f"Greedy accuracy at RL step {setting['step']} on the first {setting['num_prompts']}"
            f" prompts of the {setting['split']} split, every arm sampled in"
            f" {setting['precision']}; 90% bootstrap interval over seeds and prompts; beside it,"
            " with a few seeds, the 90% t interval over the seeds' own differences.",
            markdown_table(
                [
                    "arm",
                    "accuracy % [90%]",
                    "arm - baseline, points [90%]",
                    "over seed means [90% t]",
                    "per seed",
                    "seeds x prompts",
                ],
                final_policy_rows(scores, baseline, **boot),
            ),
        ]
    )
