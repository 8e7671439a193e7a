"""What gradient do the garbled (cut) responses get? A seeded sweep's ratio dumps.

    python -m experiments.cut_gradient --sweep=results/smollm2_break [--out=cut.md] \
        [--last_step=N] [--n_boot=4000]

Per arm, over every ratio dump of its runs under --sweep: the share of responses cut at the token
cap, the share of those with advantage 0 (no gradient whatever the clip bounds), and the share of
A < 0 tokens below the lower clip bound in cut and in finished responses, with 90% bootstrap
intervals over seeds and dump steps (calclip_jax.reports.cut_gradient). --out also writes the
table; --last_step reads the runs as they stood at that RL step.
"""

from __future__ import annotations

from absl import app, flags, logging

from calclip_jax.reports.cut_gradient import cut_report, load_sweep
from experiments.report_flags import LAST_STEP, emit, read_dumps

_SWEEP = flags.DEFINE_string("sweep", None, "A seeded sweep's folder.", required=True)
_OUT = flags.DEFINE_string("out", None, "Also write the table to this Markdown file.")
_BOOT = flags.DEFINE_integer("n_boot", 4000, "Bootstrap resamples.", lower_bound=1)


def main(argv: list[str]) -> None:
    del argv
    sweep = read_dumps(
        "cut_gradient", _SWEEP.value, lambda: load_sweep(_SWEEP.value, LAST_STEP.value)
    )
    text = cut_report(sweep, n_boot=_BOOT.value)
    emit(text, _OUT.value)


if __name__ == "__main__":
    logging.set_verbosity(logging.WARNING)
    app.run(main)
