"""Orbax checkpoints of the train state; resume from the latest complete one.

Orbax writes each step into a temporary directory and renames it when complete, so a process
killed mid-save leaves no step that `latest_step` would return.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import orbax.checkpoint as ocp

from calclip_jax.analysis import run_record as R


class Checkpointer:
    def __init__(self, workdir: str, max_to_keep: int = 2) -> None:
        options = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True)
        path = os.path.abspath(os.path.join(workdir, R.CHECKPOINTS_DIR))
        self._manager = ocp.CheckpointManager(path, options=options)

    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def all_steps(self) -> list[int]:
        return sorted(self._manager.all_steps())

    def save(self, step: int, state: Any) -> None:
        self._manager.save(step, args=ocp.args.StandardSave(state))

    def restore(self, step: int, like: Any) -> Any:
        """Restores `step` into the structure, shapes, dtypes and shardings of `like`."""
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, like)
        return self._manager.restore(step, args=ocp.args.StandardRestore(abstract))

    def restore_fields(self, step: int, like: dict[str, Any]) -> dict[str, Any]:
        """Only the train-state fields named in `like` (e.g. {"params": abstract params}), in
        their structure, shapes, dtypes and shardings: no optimizer state is read."""
        restore_args = ocp.checkpoint_utils.construct_restore_args(like)
        args = ocp.args.PyTreeRestore(item=like, restore_args=restore_args, partial_restore=True)
        return self._manager.restore(step, args=args)

    def wait(self) -> None:
        self._manager.wait_until_finished()

    def close(self) -> None:
        self._manager.wait_until_finished()
        self._manager.close()
