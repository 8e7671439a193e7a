"""`python kill_at.py POINT STEP [experiments.train flags]`: experiments.train, SIGKILLed by
itself at POINT of RL step STEP (the fault injector of test_fault_injection):

    row    right after the step's metrics row is written (before its checkpoint, if any)
    save   right after the step's asynchronous checkpoint save has started (mid-save)
"""

from __future__ import annotations

import os
import signal
import sys

from absl import app, logging

from calclip_jax.workdir.checkpoints import Checkpointer
from calclip_jax.workdir.run_logger import RunLogger

POINTS = ("row", "save")


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def arm(point: str, step: int) -> None:
    """Patches the writer of `point` to kill this process once it has run for `step`."""
    if point == "row":
        write = RunLogger.write

        def write_then_die(self, s, metrics):
            write(self, s, metrics)
            if s == step:
                _die()

        RunLogger.write = write_then_die
    elif point == "save":
        save = Checkpointer.save

        def save_then_die(self, s, state):
            save(self, s, state)
            if s == step:
                _die()

        Checkpointer.save = save_then_die
    else:
        raise SystemExit(f"unknown kill point {point!r}; choose from {POINTS}")


if __name__ == "__main__":
    point, step = sys.argv[1], int(sys.argv[2])
    arm(point, step)
    from experiments import config_cli, train

    logging.set_verbosity(logging.WARNING)
    parser = config_cli.flags_parser(train._DEFAULT_CONFIG, help_text=lambda: "")
    app.run(train.main, argv=[sys.argv[0], *sys.argv[3:]], flags_parser=parser)
