"""Paired comparison of a seeded sweep's arms: each against a baseline, FP8 against its shadow.

    python -m experiments.paired_report --sweep=results/smollm2 --baseline=bf16

Reads every `<arm>__seed<k>` run under --sweep (calclip_jax.reports.paired_arms), prints the
Markdown tables (arm - baseline per seed and RL step, clip shares against the same run's BF16
shadow, each with a 90% bootstrap interval over seeds and blocks of steps; beside each paired
difference over 3 seeds or fewer, the 90% t interval over the seeds' own means); --out also
writes them, --figure draws the paired differences as a forest plot (PNG), --bounds_figure
what Calibrated Clipping asked for and used over RL steps in each calibrating arm (PNG),
--curves_figure each
arm's reward, accuracy, entropy, garbled share, response length and A<0 clip share over RL steps
(PNG; an arm's seeds as their mean with a min-max band); --evals adds the final
policies' greedy accuracies, paired per prompt, from an `experiments.evaluate --json` file;
--last_step reads the runs as they stood at that RL step.
Refuses a sweep whose arms of one seed started RL from different SFT warm starts (their
`sft_params_digest`): they ran on different machines, and a paired difference would mix the
starts with the treatment.
"""

from __future__ import annotations

import sys

from absl import app, flags

from calclip_jax.reports.final_policies import final_policy_report, load_scores
from calclip_jax.reports.paired_arms import by_run_name, load_seeded_runs, paired_report
from calclip_jax.reports.warm_starts import mixed_warm_starts, seed_digests, warm_start_line
from experiments.report_flags import LAST_STEP, emit

_SWEEP = flags.DEFINE_string("sweep", None, "Folder of the sweep's run folders.", required=True)
_BASELINE = flags.DEFINE_string("baseline", "bf16", "The arm every other is paired against.")
_OUT = flags.DEFINE_string("out", None, "Also write the tables to this Markdown file.")
_FIGURE = flags.DEFINE_string("figure", None, "Also draw the paired differences to this PNG.")
_BOUNDS_FIGURE = flags.DEFINE_string(
    "bounds_figure", None, "Also draw the calibrating arms' bounds over RL steps to this PNG."
)
_CURVES_FIGURE = flags.DEFINE_string(
    "curves_figure", None, "Also draw each arm's training dynamics over RL steps to this PNG."
)
_EVALS = flags.DEFINE_string(
    "evals", None, "experiments.evaluate --json lines: add the final policies paired per prompt."
)
_BOOT = flags.DEFINE_integer("n_boot", 4000, "Bootstrap resamples.")


def main(argv: list[str]) -> None:
    del argv
    runs = load_seeded_runs(_SWEEP.value, LAST_STEP.value)
    if not runs:
        sys.exit(f"error: no run folders under {_SWEEP.value}")
    digests = seed_digests(_SWEEP.value)
    mixed = mixed_warm_starts(digests)
    if mixed:
        sys.exit(
            "error: arms of one seed started from different SFT warm starts (rerun the seed's arms"
            " on one machine):\n  " + "\n  ".join(mixed)
        )
    try:
        text = paired_report(runs, _BASELINE.value, n_boot=_BOOT.value)
    except ValueError as err:
        sys.exit(f"error: {err}")
    if _EVALS.value:
        try:
            scores, setting = load_scores(_EVALS.value)
            if LAST_STEP.value is not None and setting["step"] > LAST_STEP.value:
                raise ValueError(
                    f"it scores the policies of RL step {setting['step']}, after --last_step"
                )
            text += "\n\n" + final_policy_report(
                scores, setting, _BASELINE.value, n_boot=_BOOT.value
            )
        except (OSError, ValueError) as err:
            sys.exit(f"error: --evals: {err}")
    text += "\n\n" + warm_start_line(digests)
    emit(text + "\n", _OUT.value)
    if _FIGURE.value:
        from calclip_jax.reports.paired_figure import paired_forest  # matplotlib only here

        paired_forest(runs, _BASELINE.value, save=_FIGURE.value, n_boot=_BOOT.value)
    if _BOUNDS_FIGURE.value:
        from calclip_jax.reports.calibration_figure import calibration_bounds

        if calibration_bounds(runs, save=_BOUNDS_FIGURE.value) is None:
            print("(no arm calibrated: no bounds figure)", file=sys.stderr)
    if _CURVES_FIGURE.value:
        from calclip_jax.reports.plots import DYNAMICS_KEYS, plot_curves

        plot_curves(by_run_name(runs), keys=DYNAMICS_KEYS, save=_CURVES_FIGURE.value)


if __name__ == "__main__":
    app.run(main)
