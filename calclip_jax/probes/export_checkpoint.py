"""Exports a run's checkpoint as a Hugging Face model directory: config.json in the architecture
of the checkpoint the run started from (`model.checkpoint`), model.safetensors (float32 or
bfloat16) and that checkpoint's tokenizer with its chat template. Only the parameters are read
from the run's checkpoint, never the optimizer state."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import jax

from calclip_jax.config import ConfigError
from calclip_jax.data.tokenizer_export import save_checkpoint_tokenizer
from calclip_jax.model.hf_export import DTYPES, save_hf_checkpoint, source_config
from calclip_jax.probes.eval_checkpoint import EvalError, restore_checkpoint
from calclip_jax.workdir import run_record as R


class ExportError(ValueError):
    """The workdir, step or output folder cannot be exported (the message says why)."""


def check_workdir(workdir: Path) -> None:
    """Raises ExportError unless `workdir` is a run's folder, naming the runs under it (or beside
    it, when it does not exist)."""
    if not workdir.is_dir():
        runs = sorted(R.find_arms(workdir.parent))
        beside = f"; the runs in {workdir.parent}: {runs}" if runs else ""
        raise ExportError(f"{workdir}: no such directory{beside}")
    if R.load_config(workdir) is not None:
        return
    runs = sorted(R.find_arms(workdir))
    found = f"the runs in it: {runs}" if runs else "no run folder in it either"
    raise ExportError(f"{R.config_path(workdir)}: missing, not a run's workdir; {found}")


def check_out(out: Path) -> None:
    """Raises ExportError when `out` exists and is not an empty directory."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ExportError(f"--out {out} exists and is not empty; choose a new directory")


def started_from(workdir: Path) -> str:
    """The run's `model.checkpoint`; ExportError when it started from a fresh model."""
    checkpoint = R.start_checkpoint(workdir)
    if checkpoint is None:
        raise ExportError(
            f"{workdir} started from a fresh model (model.checkpoint unset): there is no "
            "Hugging Face architecture or tokenizer to export it to"
        )
    return checkpoint


def restore_run_params(workdir: Path, step: int | None) -> tuple[Any, Any, int]:
    """(run spec, params as NumPy arrays, step) of checkpoint `step` (None: the latest)."""
    try:
        spec, params, _, step = restore_checkpoint(workdir, step)
    except (EvalError, ConfigError) as err:
        raise ExportError(str(err)) from err
    return spec, jax.device_get(params), step


def export_run(
    workdir: str | Path, out: str | Path, *, step: int | None = None, dtype: str = "float32"
) -> dict[str, Any]:
    """Writes checkpoint `step` (None: the latest) of the run in `workdir` to `out` as an HF
    model directory in `dtype`; returns a record of what was written. `out` must be new or
    empty; it appears complete or not at all."""
    workdir, out = Path(workdir), Path(out)
    if dtype not in DTYPES:
        raise ExportError(f"dtype {dtype!r}; allowed: {sorted(DTYPES)}")
    check_workdir(workdir)
    started_from(workdir)
    check_out(out)
    spec, params, step = restore_run_params(workdir, step)
    tmp = out.with_name(f".{out.name}.export-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        files = save_hf_checkpoint(tmp, spec.model, params, dtype, source_config(spec.checkpoint))
        files += save_checkpoint_tokenizer(spec.checkpoint, tmp)
        out.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, out)  # onto a missing or empty directory
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "workdir": os.fspath(workdir),
        "step": step,
        "out": os.fspath(out),
        "checkpoint": spec.checkpoint,
        "dtype": dtype,
        "files": sorted(f.name for f in files),
    }
