"""Flags, input and output shared by the report commands (one definition each)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sized
from pathlib import Path
from typing import TypeVar

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

Loaded = TypeVar("Loaded", bound=Sized)

# What reading a sweep's runs and decoding their dumps raises on bad input: a report names it.
READ_ERRORS = (ConfigError, EvalError, RunRecordError, ValueError)


def emit(text: str, out: str | None) -> None:
    """Print a report as it is, and also write it to `out` when given."""
    print(text, end="")
    if out:
        Path(out).write_text(text)


def read_dumps(command: str, sweep: str, load: Callable[[], Loaded]) -> Loaded:
    """`load()`, a report's reading of `sweep`'s ratio dumps; bad input, or no run holding a dump,
    ends `command` with one line naming it."""
    try:
        loaded = load()
    except READ_ERRORS as err:
        sys.exit(f"{command}: {err}")
    if not loaded:
        sys.exit(f"{command}: no run under {sweep} holds a ratio dump")
    return loaded
