"""Writes a run's outputs: metrics.jsonl, TensorBoard events (and W&B), samples, array dumps.

The layout and the reader are `calclip_jax.workdir.run_record`'s; dashboards get the metrics
under grouped tags (`metric_groups.tag`), metrics.jsonl the flat keys.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from calclip_jax.workdir import run_record as R
from calclip_jax.workdir.metric_groups import tag
from calclip_jax.workdir.wandb_sink import WandbSink


def _summary_writer_class() -> type:
    """tensorboardX's SummaryWriter, imported without torch: where torch is installed, tensorboardX
    imports it only to accept torch tensors, seconds at every run's start (4.4 s on a 2-core
    CPU). A torch already imported is left as it is."""
    block = "torch" not in sys.modules
    if block:
        sys.modules["torch"] = None  # `import torch` raises ImportError: tensorboardX's fallback
    try:
        from tensorboardX import SummaryWriter
    finally:
        if block:
            del sys.modules["torch"]
    return SummaryWriter


def _jsonable(value: Any) -> Any:
    value = float(value) if not isinstance(value, bool | int | str | type(None)) else value
    return None if isinstance(value, float) and not math.isfinite(value) else value


def write_npz(path: Path, arrays: Mapping[str, Any]) -> None:
    """`arrays` compressed to `path`, atomically: a killed write leaves no torn file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        np.savez_compressed(f, **arrays)
    os.replace(tmp, path)


class RunLogger:
    """Appends metrics to workdir/metrics.jsonl and TensorBoard; writes sample files.

    `truncate_after(step)` drops what a killed run logged past the step it resumes from (0: a
    fresh start), so the resumed run rewrites it. `active=False` makes a logger that writes
    nothing (every process of a multi-process run but the leader). `wandb`: an open W&B sink
    that gets the same scalars as TensorBoard.
    """

    def __init__(
        self,
        workdir: str,
        tensorboard: bool = True,
        active: bool = True,
        wandb: WandbSink | None = None,
    ) -> None:
        self.workdir, self.active = workdir, active
        self._wandb = wandb if active else None
        self.path = os.path.join(workdir, R.METRICS_FILE)
        self._tb = None
        if tensorboard and active:
            self._tb = _summary_writer_class()(os.path.join(workdir, R.TB_DIR))

    def truncate_after(self, step: int) -> None:
        """Rewrites metrics.jsonl as `run_record.read_metrics` reads it, up to `step`, and
        deletes the ratio dumps, traces and sample files of later steps."""
        if not self.active:
            return
        ratios = os.path.join(self.workdir, R.RATIOS_DIR)
        per_step = (
            R.step_files(ratios, "npz"),
            R.step_files(ratios, "npz", R.TRACE_PREFIX),
            R.step_files(os.path.join(self.workdir, R.SAMPLES_DIR), "txt"),
        )
        for files in per_step:
            for s, path in files.items():
                if s > step:
                    path.unlink()
        if not os.path.exists(self.path):
            return
        kept = [R.metrics_line(row) for row in R.read_metrics(self.workdir) if row["step"] <= step]
        with open(self.path + ".tmp", "w") as f:
            f.writelines(kept)
        os.replace(self.path + ".tmp", self.path)

    def write(self, step: int, metrics: Mapping[str, Any]) -> None:
        if not self.active:
            return
        row = {"step": step, **{k: _jsonable(v) for k, v in metrics.items()}}
        with open(self.path, "a") as f:
            f.write(R.metrics_line(row))
            f.flush()
            os.fsync(f.fileno())
        scalars = {
            tag(k): v
            for k, v in row.items()
            if k != "step" and isinstance(v, int | float) and not isinstance(v, bool)
        }
        if self._tb is not None:
            for name, v in scalars.items():
                self._tb.add_scalar(name, v, step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(step, scalars)

    def write_samples(self, step: int, samples: Sequence[tuple[str, str, float]]) -> None:
        if not self.active:
            return
        path = R.sample_path(self.workdir, step)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w") as f:
            for prompt, response, reward in samples:
                f.write(f"{reward:+.3f}  {prompt}|{response}\n")

    def write_ratio_dump(self, step: int, arrays: Mapping[str, Any]) -> None:
        """The ratio dump of RL step `step` (`run_record.ratio_dump_path`, compressed)."""
        if self.active:
            write_npz(R.ratio_dump_path(self.workdir, step), arrays)

    def write_trace(self, step: int, arrays: Mapping[str, Any]) -> None:
        """The clipped-token trace of RL step `step` (`run_record.trace_path`, compressed)."""
        if self.active:
            write_npz(R.trace_path(self.workdir, step), arrays)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.close()
