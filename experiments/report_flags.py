"""Flags shared by the report commands (one definition each)."""

from __future__ import annotations

from absl import flags

LAST_STEP = flags.DEFINE_integer(
    "last_step",
    None,
    "Read each run only through this RL step: the report as it stood when the runs were that"
    " long (metrics rows, ratio dumps and traces after it are left out).",
    lower_bound=1,
)
