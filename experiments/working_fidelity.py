"""Is the working right, or only the result? A `worked_addition` sweep's sampled batches graded.

    python -m experiments.working_fidelity --sweep=results/smollm2_break [--baseline=bf16] \
        [--out=fidelity.md] [--figure=fidelity.png] [--surprisal]

Decodes every ratio dump (`log.ratios_every`: the whole batch) of every run under --sweep and
grades each response against the task's demonstration (calclip_jax.data.tasks.column_working):
result right, every column written, columns summing the right digits, column sums true, the
working verbatim, and (of the sums that carry) a carry left out. Prints per arm the share over
the dump steps all arms share and over their second half, with 90% bootstrap intervals over seeds
and steps, the late half paired against --baseline; then how often the result is right with the
columns right and without; then the shares per dump step. --out also writes it, --figure draws
the shares over RL steps. --surprisal appends, per arm, the sampled tokens' mean surprisal by role
(the working's digits, the result's, the rest) over the first and second half of the shared dump
steps (calclip_jax.reports.working_surprisal): which part of a response carries its entropy.
--last_step reads the runs as they stood at that RL step.
"""

from __future__ import annotations

import sys

from absl import app, flags, logging

from calclip_jax.reports.working_fidelity import fidelity_report, seed_steps, sweep_fidelity
from calclip_jax.reports.working_surprisal import surprisal_report, sweep_surprisal
from experiments.report_flags import LAST_STEP, emit, read_dumps

_SWEEP = flags.DEFINE_string("sweep", None, "A seeded sweep's folder.", required=True)
_BASELINE = flags.DEFINE_string("baseline", None, "Arm the others are paired against.")
_OUT = flags.DEFINE_string("out", None, "Also write the report to this Markdown file.")
_FIGURE = flags.DEFINE_string("figure", None, "Also draw the shares over RL steps to this PNG.")
_BOOT = flags.DEFINE_integer("n_boot", 4000, "Bootstrap resamples.")
_SURPRISAL = flags.DEFINE_bool("surprisal", False, "Append the surprisal by token role.")


def main(argv: list[str]) -> None:
    del argv
    fidelity = read_dumps(
        "working_fidelity", _SWEEP.value, lambda: sweep_fidelity(_SWEEP.value, LAST_STEP.value)
    )
    if _BASELINE.value is not None and _BASELINE.value not in fidelity:
        sys.exit(f"working_fidelity: no arm {_BASELINE.value!r}; arms: {sorted(fidelity)}")
    text = fidelity_report(fidelity, _BASELINE.value, n_boot=_BOOT.value)
    if _SURPRISAL.value:
        surprisal = sweep_surprisal(_SWEEP.value, LAST_STEP.value)
        text += "\n" + surprisal_report(surprisal, seed_steps(surprisal))
    emit(text, _OUT.value)
    if _FIGURE.value:
        from calclip_jax.reports.working_fidelity_figure import fidelity_figure  # matplotlib here

        fidelity_figure(fidelity, save=_FIGURE.value)


if __name__ == "__main__":
    logging.set_verbosity(logging.WARNING)
    app.run(main)
