"""Run outputs: metrics.jsonl (one object per RL step), TensorBoard events, sample dumps."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def _jsonable(value: Any) -> Any:
    value = float(value) if not isinstance(value, bool | int | str | type(None)) else value
    return None if isinstance(value, float) and not math.isfinite(value) else value


class RunLogger:
    """Appends metrics to workdir/metrics.jsonl and TensorBoard; writes sample files.

    `truncate_after(step)` drops JSONL lines past a restored checkpoint so a resumed run
    rewrites them (and a torn last line from a killed process). `active=False` makes a logger
    that writes nothing (every process of a multi-process run but the leader).
    """

    def __init__(self, workdir: str, tensorboard: bool = True, active: bool = True) -> None:
        self.workdir, self.active = workdir, active
        self.path = os.path.join(workdir, "metrics.jsonl")
        self._tb = None
        if tensorboard and active:
            from tensorboardX import SummaryWriter

            self._tb = SummaryWriter(os.path.join(workdir, "tb"))

    def truncate_after(self, step: int) -> None:
        if not self.active or not os.path.exists(self.path):
            return
        kept = []
        with open(self.path) as f:
            for line in f:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    break
                if row.get("step", 0) <= step:
                    kept.append(line if line.endswith("\n") else line + "\n")
        with open(self.path + ".tmp", "w") as f:
            f.writelines(kept)
        os.replace(self.path + ".tmp", self.path)

    def write(self, step: int, metrics: Mapping[str, Any]) -> None:
        if not self.active:
            return
        row = {"step": step, **{k: _jsonable(v) for k, v in metrics.items()}}
        with open(self.path, "a") as f:
            f.write(json.dumps(row) + "\n")
            f.flush()
            os.fsync(f.fileno())
        if self._tb is not None:
            for k, v in row.items():
                if k != "step" and isinstance(v, int | float) and not isinstance(v, bool):
                    self._tb.add_scalar(k, v, step)
            self._tb.flush()

    def write_samples(self, step: int, samples: Sequence[tuple[str, str, float]]) -> None:
        if not self.active:
            return
        folder = os.path.join(self.workdir, "samples")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"step_{step:06d}.txt"), "w") as f:
            for prompt, response, reward in samples:
                f.write(f"{reward:+.3f}  {prompt}|{response}\n")

    def write_arrays(self, folder: str, step: int, arrays: Mapping[str, Any]) -> None:
        """workdir/<folder>/step_XXXXXX.npz (compressed)."""
        if not self.active:
            return
        path = os.path.join(self.workdir, folder)
        os.makedirs(path, exist_ok=True)
        np.savez_compressed(os.path.join(path, f"step_{step:06d}.npz"), **arrays)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


def read_metrics(workdir: str) -> list[dict[str, Any]]:
    """All complete rows of workdir/metrics.jsonl."""
    rows = []
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return rows
