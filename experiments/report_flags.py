"""Flags and output shared by the report commands (one definition each)."""

from __future__ import annotations

from pathlib import Path

from absl import flags

from calclip_jax.config import ConfigError
from calclip_jax.probes.eval_checkpoint import EvalError
from calclip_jax.workdir.run_record import RunRecordError

LAST_STEP = flags.DEFINE_integer(
    "last_step",
    None,
    "Read each run only through this RL step: the report as it stood when the runs were that"
    " long (metrics rows, ratio dumps and traces after it are left out).",
    lower_bound=1,
)

# What reading a sweep's runs and decoding their dumps raises on bad input: a report names it.
READ_ERRORS = (ConfigError, EvalError, RunRecordError, ValueError)


def emit(text: str, out: str | None) -> None:
    """Print a report as it is, and also write it to `out` when given."""
    print(text, end="")
    if out:
        Path(out).write_text(text)
