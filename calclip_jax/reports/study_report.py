"""The study's report (RESULTS.md's tables and figures) from a results tree:
<results>/tables.md and PNG figures in <results>/figures/.

    layout = study.StudyLayout(...)   # from configs/study.py (experiments/report.py)
    study.check_results(root, layout.phases)
    text = write_report(root, layout)
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

from calclip_jax.reports import plots
from calclip_jax.reports.study import (
    StudyLayout,
    granularity_rows,
    has_ratio_dumps,
    load_all,
    phase_rows,
)
from calclip_jax.reports.study_dumps import composition_table, noise_table
from calclip_jax.reports.study_figures import distortion_bars, probability_binned, rebound_chart
from calclip_jax.reports.study_tables import distortion_table, dynamics_table, seeds_table

FIGURES_DIR = "figures"  # under the results folder
TABLES_FILE = "tables.md"
HEADLINE_FIGURE_ARMS = (
    "bf16",
    "fp8_block_tis",
    "fp8_block_tis_calib",
    "fp8_tensor_tis",
    "fp8_tensor_tis_calib",
)
HEADLINE_CURVES = (
    "entropy",
    "reward_mean",
    "eval_accuracy",
    "clip_frac_lower_neg",
    "response_len_mean",
    "clip_lower",
)
SEARCH_CURVES = ("entropy", "reward_mean", "eval_accuracy", "clip_frac_lower_neg")
REAL_MODEL_CURVES = (
    "reward_mean",
    "eval_accuracy",
    "entropy",
    "garbled_frac",
    "clip_frac_lower_neg",
    "clip_frac_lower_neg_ref",
)


def curve_figures(arms: dict[str, dict], figs: Path, layout: StudyLayout) -> None:
    """Curves over RL steps: the headline arms, the boundary phase, each own-figure phase (with
    its seeds: a band per arm) and the calibrated bounds of the granularity phase."""
    headline = {  # seed 0 (granularity phase) and its seeds (seeds phase): a band per arm
        n: a["dir"] for n, a in arms.items() if plots.seed_group(n) in HEADLINE_FIGURE_ARMS
    }
    plots.plot_curves(headline, keys=HEADLINE_CURVES, save=figs / "training_dynamics.png")
    boundary = {n: a["dir"] for n, a in arms.items() if n.startswith("boundary/")}
    if boundary:
        plots.plot_curves(boundary, keys=SEARCH_CURVES, save=figs / "boundary.png")
    for phase in layout.own_figure_phases:
        stress = {  # with the phase's seeds (<phase>_seeds/<arm>__seed<N>): a band per arm
            n.split("/", 1)[1]: a["dir"]
            for n, a in arms.items()
            if n.startswith((phase + "/", phase + "_seeds/"))
        }
        if stress:
            keys = REAL_MODEL_CURVES if phase in layout.real_model_phases else SEARCH_CURVES
            plots.plot_curves(stress, keys=keys, save=figs / f"{phase}.png")
    calibrated = {  # the granularity phase's calibrated arms
        n: a["dir"] for n, a in arms.items() if n.endswith("_tis_calib") and "/" not in n
    }
    plots.plot_curves(
        calibrated, keys=("clip_lower", "clip_upper"), save=figs / "calibrated_bounds.png"
    )


def probability_figures(
    arms: dict[str, dict], dumped: list[str], figs: Path, layout: StudyLayout
) -> str:
    """The lower-clipping-by-probability table of every arm with ratio dumps (too many for a
    figure), and the figures: uncalibrated arms of the study setting, of the search phases and
    of each real-model phase."""
    uncalibrated = [n for n in dumped if n.endswith(("_tis", "_tis_e5m2"))]
    searched = [n for n in uncalibrated if n.startswith(layout.search_phases)]
    real = [n for n in dumped if n.startswith(layout.real_model_phases)]
    binned = probability_binned(arms, dumped, None)
    probability_binned(
        arms,
        [n for n in uncalibrated if n not in searched and n not in real],
        figs / "clip_by_probability.png",
    )
    if searched:
        probability_binned(arms, searched, figs / "search_clip_by_probability.png")
    for phase in layout.real_model_phases:
        if any(n.startswith(phase + "/") for n in real):
            probability_binned(
                arms,
                [n for n in real if n.startswith(phase + "/")],
                figs / f"{phase}_clip_by_probability.png",
            )
    return binned


def tables_markdown(
    arms: dict[str, dict], dumped: list[str], binned: str, layout: StudyLayout
) -> str:
    """tables.md: every table under its heading (`binned`: `probability_figures`' table)."""
    grpo_rows = granularity_rows("", layout.granularities)
    return "\n\n".join(
        [
            "## Ratio distortion (mean over all RL steps)",
            distortion_table(arms, grpo_rows),
            "## Lower clipping by token probability (ratio dumps, same tokens)",
            binned,
            "## Precision noise of the ratio (ratio dumps, same tokens)",
            noise_table(arms, dumped),
            "## Batch composition vs precision noise (old log-probs, whole batch vs minibatch)",
            composition_table(arms),
            "## Training dynamics",
            dynamics_table(arms),
            "## Seeds",
            seeds_table(arms, layout.seed_runs),
            *itertools.chain.from_iterable(
                (
                    f"## Ratio distortion, {phase} phase (mean over all RL steps)",
                    distortion_table(arms, phase_rows(phase), bf16=f"{phase}/bf16"),
                )
                for phase in layout.own_figure_phases
                if any(n.startswith(phase + "/") for n in arms)
            ),
        ]
    )


def write_report(root: Path, layout: StudyLayout) -> str:
    """Writes the figures into <root>/figures/ and the tables into <root>/tables.md; returns the
    tables' text. Check the tree first (`study.check_results`)."""
    figs = root / FIGURES_DIR
    os.makedirs(figs, exist_ok=True)
    arms = load_all(root, layout.phases)
    curve_figures(arms, figs, layout)
    dumped = [n for n in arms if has_ratio_dumps(arms[n])]
    binned = probability_figures(arms, dumped, figs, layout)
    distortion_bars(arms, granularity_rows("", layout.granularities), figs / "distortion.png")
    rebound_chart(arms, figs / "rebound.png")
    text = tables_markdown(arms, dumped, binned, layout)
    (root / TABLES_FILE).write_text(text + "\n")
    return text
