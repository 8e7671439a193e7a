"""Orbax checkpoints of the train state; resume from the newest intact one.

Orbax writes each step into a temporary directory and renames it when complete, so a process
killed mid-save leaves no step that orbax lists. Each finalized step also gets a checksum
manifest (`checksums`) once its asynchronous write has finished; `restore_latest` skips steps
that fail it, or that orbax cannot read, moving them to workdir/checkpoints_damaged/.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from calclip_jax.parallel.multihost import is_leader, sync
from calclip_jax.workdir import run_record as R
from calclip_jax.workdir.checksums import has_manifest, manifest_problem, write_manifest

DAMAGED_DIR = "checkpoints_damaged"


class Checkpointer:
    def __init__(self, workdir: str, max_to_keep: int = 2) -> None:
        options = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True)
        self.workdir = os.path.abspath(workdir)
        self.path = Path(self.workdir) / R.CHECKPOINTS_DIR
        self._manager = ocp.CheckpointManager(self.path, options=options)

    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def all_steps(self) -> list[int]:
        return sorted(self._manager.all_steps())

    def save(self, step: int, state: Any) -> None:
        self._seal_finished()  # the previous save's manifest, before this save starts
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

    def restore_latest(self, like: Any, log: Callable[[str], None]) -> tuple[int, Any]:
        """(step, state) of the newest intact checkpoint, (0, like) when there is none.

        Damaged steps (checksum mismatch, missing or truncated files, an empty folder, an orbax
        read error) are moved to workdir/checkpoints_damaged/ and named in one log line.
        """
        step, state, damaged = 0, like, []
        for candidate in sorted(self._manager.all_steps(), reverse=True):
            problem = manifest_problem(self.path / str(candidate))
            if problem is None:
                try:
                    step, state = candidate, self.restore(candidate, like)
                    break
                except Exception as err:  # orbax/tensorstore raise many kinds
                    first_line = (str(err).splitlines() or [""])[0][:120]
                    problem = f"unreadable: {type(err).__name__}: {first_line}"
            damaged.append((candidate, problem))
        if damaged:
            moved = self._quarantine([s for s, _ in damaged])
            what = "; ".join(f"step {s} ({p})" for s, p in damaged)
            start = f"resuming from step {step}" if step else "no intact checkpoint: starting over"
            log(f"damaged checkpoint {what} moved to {moved}; {start}")
        return step, state

    def _quarantine(self, steps: list[int]) -> Path:
        """Moves `steps` out of orbax's sight (leader only; every process waits for it)."""
        target = Path(self.workdir) / DAMAGED_DIR
        sync("checkpoints_checked")
        if is_leader():
            target.mkdir(exist_ok=True)
            for step in steps:
                dest, n = target / str(step), 1
                while dest.exists():
                    dest, n = target / f"{step}.{n}", n + 1
                shutil.move(self.path / str(step), dest)
        sync("checkpoints_quarantined")
        self._manager.reload()
        return target

    def _seal_finished(self) -> None:
        """Waits for the pending save, then writes the manifest of every finalized step that
        lacks one (the leader; the workdir is shared)."""
        self._manager.wait_until_finished()
        if not is_leader():
            return
        for step in self._manager.all_steps():
            folder = self.path / str(step)
            if folder.is_dir() and not has_manifest(folder):
                write_manifest(folder)

    def close(self) -> None:
        self._seal_finished()
        self._manager.close()
