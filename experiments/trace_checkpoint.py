"""The clipped-token trace of a run that did not trace while it ran, from one of its checkpoints.

    python -m experiments.trace_checkpoint --workdir=runs/x --step=40 [--count=3] [--overwrite]

Rescores the `count` latest ratio dumps before `step` (their rows) with checkpoint `step`, and
writes the trace file `log.trace_dumps` would have written there (ratios/trace_step_*.npz);
`python -m experiments.clipped_trace --workdir=runs/x` then reads it.
"""

from __future__ import annotations

import sys

from absl import app, flags, logging

from calclip_jax.config import ConfigError
from calclip_jax.probes.eval_checkpoint import EvalError
from calclip_jax.probes.trace_checkpoint import trace_from_checkpoint

_WORKDIR = flags.DEFINE_string("workdir", None, "The run folder.", required=True)
_STEP = flags.DEFINE_integer("step", None, "RL step of the checkpoint.", required=True)
_COUNT = flags.DEFINE_integer("count", 3, "How many of the latest earlier dumps to rescore.")
_OVERWRITE = flags.DEFINE_bool("overwrite", False, "Replace an existing trace of that step.")


def main(argv: list[str]) -> None:
    del argv
    try:
        path, steps = trace_from_checkpoint(
            _WORKDIR.value, _STEP.value, _COUNT.value, overwrite=_OVERWRITE.value
        )
    except (EvalError, ConfigError) as err:
        sys.exit(f"trace_checkpoint: {err}")
    print(f"{path}: the dumps of RL steps {steps} rescored by checkpoint {_STEP.value}")


if __name__ == "__main__":
    logging.set_verbosity(logging.WARNING)
    app.run(main)
