"""Run the arms of a sweep as `experiments.train` subprocesses, then write the summary table.

  python -m experiments.sweep --config=configs/sweep_granularity.py --workdir=DIR [--parallel=N]

A sweep config's get_config(arg) returns a ConfigDict with `base` (a train config file, optionally
`file.py:arm`), `arms` (arm name -> overrides), optional `seeds` (arms x seeds -> `<arm>__seed<N>`)
and optional `common` overrides. Overrides are dotted keys ({"train.precision": "fp8_block"}, in a
ConfigDict built with allow_dotted_keys=True) or nested dicts; precedence common < arm < seed.
Arm `a` runs in DIR/a with its output in DIR/a/train.log; an arm whose summary.json exists is
skipped; a failing arm is reported and the others go on; the exit status is 1 if any arm failed.
DIR/summary.csv and DIR/summary.md come from calclip_jax.reports.summary; DIR/commands.sh lists
the exact command of each arm.
"""

from __future__ import annotations

import sys
from pathlib import Path

from absl import app, flags

from calclip_jax.config import ConfigError
from calclip_jax.sweeps import run_sweep
from experiments import config_cli, config_help

_CONFIG = config_cli.define_config_flag(
    "Sweep config file[:arg] (get_config(arg) -> base, arms, seeds, common); see above.",
    lock_config=False,
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Sweep directory; one subdirectory per arm.")
_PARALLEL = flags.DEFINE_integer("parallel", 1, "Arms run at the same time.")
_QUIET = flags.DEFINE_bool("quiet", False, "Print only failures and the summary path.")
_TRAIN_MODULE = flags.DEFINE_string(
    "train_module", "experiments.train", "Module run per arm (python -m), or a .py script path."
)
_ONLY = flags.DEFINE_list("only", [], "Run only these (expanded) arm names.")
_DRY_RUN = flags.DEFINE_bool("dry_run", False, "Print the commands and exit without running.")

# a relative `base` may be relative to it; first on the arms' PYTHONPATH (configs/ importable)
REPO_ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    if _CONFIG.value is None or not _WORKDIR.value:
        raise app.UsageError("--config and --workdir are required")
    try:
        results = run_sweep(
            _CONFIG.value,
            _WORKDIR.value,
            train_module=_TRAIN_MODULE.value,
            repo_root=REPO_ROOT,
            parallel=_PARALLEL.value,
            quiet=_QUIET.value,
            only=_ONLY.value,
            dry_run=_DRY_RUN.value,
        )
    except ConfigError as err:
        sys.exit(f"error: {err}")
    if any(r.status == "failed" for r in results):
        sys.exit(1)


if __name__ == "__main__":
    app.run(
        main,
        flags_parser=config_cli.flags_parser(help_text=lambda: config_help.catalogue("sweep")),
    )
