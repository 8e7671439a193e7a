"""Tables and figures of RESULTS.md from the study's sweep directories.

    python -m experiments.report --results=results

Reads every arm under <results>/<phase>/ (the phases of configs/study.py; missing phases are
skipped), writes <results>/tables.md and PNG figures into <results>/figures/
(calclip_jax.reports.study_report).
"""

from __future__ import annotations

import sys
from pathlib import Path

from absl import app, flags

from calclip_jax.reports.study import StudyLayout, check_results, seed_runs
from calclip_jax.reports.study_report import write_report
from configs import study
from configs.arms import FP8_PRESET_SUFFIXES

_RESULTS = flags.DEFINE_string("results", "results", "Folder holding the study's sweep dirs.")


def study_layout() -> StudyLayout:
    """configs/study.py's phases, arms and seeds as the report reads them."""
    return StudyLayout(
        phases=tuple(study.PHASES),
        search_phases=tuple(study.BOUNDARY_SEARCH_PHASES),
        real_model_phases=tuple(study.REAL_MODEL_PHASES),
        granularities=tuple(FP8_PRESET_SUFFIXES),
        seed_runs=seed_runs(
            headline=study.HEADLINE_ARMS,
            extra_seeds=study.EXTRA_SEEDS,
            stress_arms=tuple(study.stress_seed_arms()),
            stress_dapo_arms=tuple(study.stress_dapo_seed_arms()),
            stress_seeds=study.STRESS_SEEDS,
        ),
    )


def main(argv: list[str]) -> None:
    del argv
    root = Path(_RESULTS.value)
    layout = study_layout()
    try:
        check_results(root, layout.phases)
    except ValueError as err:
        sys.exit(f"error: {err}")
    print(write_report(root, layout))


if __name__ == "__main__":
    app.run(main)
