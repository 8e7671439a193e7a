"""Train: SFT warm start (cached), then the RL loop, with absl flags + ml_collections configs.

    python -m experiments.train                      # small built-in default (FP8 + CalClip)
    python -m experiments.train --config=configs/dapo.py:fp8_block_tis_calib --workdir=/tmp/run \
        --config.train.steps=50
Rerunning a command on the same workdir resumes from its newest intact checkpoint, and gives
the same metrics.jsonl, summary.json and ratio dumps as an uninterrupted run. A workdir holds
one run at a time (workdir/run.lock) and remembers its config: a rerun with other values is
refused, naming the changed keys, unless --allow_config_change (the change is then recorded in
config.json under "config_changes"). Free to change on a rerun: train.steps upward (extends a
run, finished or not), eval.every, log.*, sft.cache_dir, task.data_dir.

Multi-process (multi-host): run the same command once per process, adding
    --coordinator_address=HOST0:PORT --num_processes=N --process_id=I
The mesh spans every process's devices; the workdir (and sft.cache_dir) must be a filesystem
all processes share (orbax checkpoints are collective); process 0 alone writes logs and caches.
On CPU: XLA_FLAGS=--xla_force_host_platform_device_count=K for K devices per process.
A lost process (killed, preempted) stops the others within --heartbeat_timeout_s, the
coordination service naming it; rerunning the same command on every process resumes from the
newest checkpoint, which also restores on another process count over the same devices.
"""

from __future__ import annotations

import os
import sys

import jax
from absl import app, flags, logging

from calclip_jax.config import ConfigError
from calclip_jax.parallel.multihost import lost_contact_note
from calclip_jax.train.rl_loop import format_summary, run_experiment, say
from calclip_jax.workdir.lock import WorkdirError
from calclip_jax.workdir.run_record import checkpoint_steps
from experiments import config_cli, config_help

_DEFAULT_CONFIG = os.path.join(os.path.dirname(__file__), "..", "configs", "default.py")
_CONFIG = config_cli.define_config_flag(
    "Config file[:arm] (default configs/default.py); see the families and arms above."
)
_WORKDIR = flags.DEFINE_string("workdir", "workdirs/default", "Output directory (resumable).")
_COORDINATOR = flags.DEFINE_string(
    "coordinator_address", "", "host:port of process 0 (multi-process runs); empty: single process."
)
_NUM_PROCESSES = flags.DEFINE_integer("num_processes", 1, "Processes in a multi-process run.")
_PROCESS_ID = flags.DEFINE_integer("process_id", 0, "This process's index.")
_HEARTBEAT_TIMEOUT = flags.DEFINE_integer(
    "heartbeat_timeout_s",
    30,
    "Multi-process runs: seconds without a heartbeat after which a process counts as lost; "
    "the others then stop, naming it (rerun the same command on every process to resume).",
)
_ALLOW_CONFIG_CHANGE = flags.DEFINE_bool(
    "allow_config_change",
    False,
    "Continue a workdir's run with a config that differs from its config.json (recorded there).",
)


def main(argv: list[str]) -> None:
    del argv
    if _COORDINATOR.value:
        jax.distributed.initialize(
            _COORDINATOR.value,
            _NUM_PROCESSES.value,
            _PROCESS_ID.value,
            heartbeat_timeout_seconds=_HEARTBEAT_TIMEOUT.value,
        )
    try:
        summary = run_experiment(
            _CONFIG.value, _WORKDIR.value, allow_config_change=_ALLOW_CONFIG_CHANGE.value
        )
    except ConfigError as err:
        sys.exit(f"error: invalid config: {err}")
    except WorkdirError as err:
        sys.exit(f"error: workdir refused: {err}")
    except jax.errors.JaxRuntimeError as err:
        if jax.process_count() > 1:
            resumes_from = max(checkpoint_steps(_WORKDIR.value), default=0)
            note = lost_contact_note(err, _HEARTBEAT_TIMEOUT.value, resumes_from)
            print(note, file=sys.stderr, flush=True)
        raise
    say(format_summary(summary, _WORKDIR.value))


if __name__ == "__main__":
    logging.set_verbosity(logging.WARNING)
    app.run(
        main,
        flags_parser=config_cli.flags_parser(
            _DEFAULT_CONFIG, help_text=lambda: config_help.catalogue("train")
        ),
    )
