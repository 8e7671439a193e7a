"""Do arms garble at the same RL steps, and on the same prompts?

    python -m experiments.garbled_coincidence --sweep=results/smollm2_break [--threshold=0.03] \
        [--out=garbled_coincidence.md] [--last_step=N]

For every seed and pair of arms under --sweep: the RL steps where both arms' garbled share exceeds
--threshold, against circular shifts of one arm's series; then, at the ratio dumps both runs hold,
the prompts with an unfinished response in both arms, against random prompts
(calclip_jax.reports.garbled_coincidence); each p beside its Holm adjustment over the table's
tests. --out also writes the table; --last_step reads the runs as they stood at that RL step.
"""

from __future__ import annotations

import sys

from absl import app, flags, logging

from calclip_jax.reports.garbled_coincidence import arms_of_seed, coincidence_report, load_sweep
from experiments.report_flags import LAST_STEP, READ_ERRORS, emit

_SWEEP = flags.DEFINE_string("sweep", None, "A seeded sweep's folder.", required=True)
_THRESHOLD = flags.DEFINE_float(
    "threshold", 0.03, "Garbled share above which an RL step counts as a spike."
)
_OUT = flags.DEFINE_string("out", None, "Also write the table to this Markdown file.")


def main(argv: list[str]) -> None:
    del argv
    if not 0.0 <= _THRESHOLD.value < 1.0:
        sys.exit(f"garbled_coincidence: --threshold must lie in [0, 1), got {_THRESHOLD.value}")
    try:
        sweep = load_sweep(_SWEEP.value, LAST_STEP.value)
        if not any(len(arms) > 1 for arms in arms_of_seed(sweep).values()):
            sys.exit(f"garbled_coincidence: no seed under {_SWEEP.value} has two arms to pair")
        text = coincidence_report(sweep, _THRESHOLD.value)
    except READ_ERRORS as err:
        sys.exit(f"garbled_coincidence: {err}")
    emit(text, _OUT.value)


if __name__ == "__main__":
    logging.set_verbosity(logging.WARNING)
    app.run(main)
