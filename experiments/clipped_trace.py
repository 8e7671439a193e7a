"""Do tokens clipped on A < 0 at RL step s gain probability later? A run's clipped-token trace.

    python -m experiments.clipped_trace --workdir=runs/x [--out=trace.md] [--figure=trace.png]
    python -m experiments.clipped_trace --sweep=results/sweep [--out=trace.md]

Reads the traces a run wrote with `log.trace_dumps` (or `experiments.trace_checkpoint` wrote
afterwards; calclip_jax.reports.clipped_trace) and prints a Markdown table: per earlier step s
and trace step t, step s's tokens by group (A<0 below s's lower clip bound, A<0 not clipped,
A>0) with the mean log-prob change since s sampled them, since s's updates ended, and the latter
in the BF16 shadow (where the run traced it), each with its 90% bootstrap interval over rows;
--out also writes it, --figure draws it against the lag.
With --sweep, a seeded sweep's arms pooled over seeds: what put their A<0 tokens below the bound
(their log r against the BF16 shadow's on the same tokens; calclip_jax.reports.clip_origins),
then the traced runs per lag with the contrast clipped minus not clipped
(calclip_jax.reports.sweep_trace). --last_step reads the runs as they stood at that RL step.
"""

from __future__ import annotations

import sys

from absl import app, flags

from calclip_jax.reports.clipped_trace import trace_rows, trace_table
from calclip_jax.workdir.run_record import RunRecordError
from experiments.report_flags import LAST_STEP, emit

_WORKDIR = flags.DEFINE_string("workdir", None, "The run folder.")
_SWEEP = flags.DEFINE_string("sweep", None, "A seeded sweep's folder, instead of --workdir.")
_OUT = flags.DEFINE_string("out", None, "Also write the table to this Markdown file.")
_FIGURE = flags.DEFINE_string("figure", None, "Also draw the trace against the lag to this PNG.")
_BOOT = flags.DEFINE_integer("n_boot", 4000, "Bootstrap resamples.")


def sweep_main() -> None:
    """--sweep: what clipped each arm's A<0 tokens (its ratio dumps), and what came after (its
    traces, where it has some)."""
    from calclip_jax.reports.clip_origins import clip_origin_table, clip_origins
    from calclip_jax.reports.sweep_trace import sweep_trace_table, sweep_traces

    if _FIGURE.value:
        sys.exit("error: --figure draws one run's trace: pass --workdir")
    try:
        origins = clip_origins(_SWEEP.value, n_boot=_BOOT.value, last_step=LAST_STEP.value)
        rows = sweep_traces(_SWEEP.value, n_boot=_BOOT.value, last_step=LAST_STEP.value)
    except (RunRecordError, ValueError) as err:
        sys.exit(f"error: {err}")
    if not origins:
        sys.exit(f"error: no run under {_SWEEP.value} holds a ratio dump (ratios/step_*.npz)")
    text = (
        clip_origin_table(origins)
        + "\n\n"
        + (sweep_trace_table(rows) if rows else "(no run holds a trace: ratios/trace_step_*.npz)")
    )
    emit(text + "\n", _OUT.value)


def main(argv: list[str]) -> None:
    del argv
    if (_WORKDIR.value is None) == (_SWEEP.value is None):
        sys.exit("error: pass exactly one of --workdir and --sweep")
    if _SWEEP.value is not None:
        sweep_main()
        return
    try:
        rows = trace_rows(_WORKDIR.value, n_boot=_BOOT.value, last_step=LAST_STEP.value)
    except (RunRecordError, ValueError) as err:
        sys.exit(f"error: {err}")
    if not rows:
        sys.exit(
            f"error: {_WORKDIR.value} holds no trace (ratios/trace_step_*.npz): run it with "
            "--config.log.trace_dumps=N and log.ratios_every set"
        )
    text = trace_table(rows)
    emit(text + "\n", _OUT.value)
    if _FIGURE.value:
        from calclip_jax.reports.clipped_trace_figure import trace_figure  # matplotlib only here

        trace_figure(rows, save=_FIGURE.value)


if __name__ == "__main__":
    app.run(main)
