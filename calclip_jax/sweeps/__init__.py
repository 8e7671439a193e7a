"""Sweeps: arms of a sweep config expanded to train commands, run as subprocesses, summarized.

A sweep config (`get_config(arg)` -> ConfigDict) has `base` (a train config file, optionally
`file.py:arm`), `arms` (arm name -> overrides), optional `seeds` (arms x seeds ->
`<arm>__seed<N>`) and optional `common` overrides; precedence common < arm < seed.

    arms       expand_arms, flatten_overrides: the config's arms as dotted overrides
    commands   train_command, format_override, resolve_base: one arm's argv; commands.sh
    runner     run_sweep, ArmResult: runs the unfinished arms, writes summary.csv / summary.md

The experiments/sweep.py CLI passes the repository root and the train module
(`experiments.train`); this package imports neither configs/ nor experiments/.
"""

from calclip_jax.sweeps.arms import expand_arms, flatten_overrides
from calclip_jax.sweeps.commands import format_override, resolve_base, train_command
from calclip_jax.sweeps.runner import ArmResult, run_sweep

__all__ = [
    "ArmResult",
    "expand_arms",
    "flatten_overrides",
    "format_override",
    "resolve_base",
    "run_sweep",
    "train_command",
]
