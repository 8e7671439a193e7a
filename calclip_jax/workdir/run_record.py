"""The run record: the layout of a run's workdir, and the one reader of its files.

    workdir/
      config.json              the config (ConfigDict.to_json) plus "resolved": values the run
                               resolved ("clip_bounds": [lower, upper], "rollout_recipe", ...)
      metrics.jsonl            one JSON object per RL step ("step" + metrics), appended
      summary.json             headline numbers; written only when the run finished
      run_info.json            per start of the process: git commit (+ dirty), package versions
      train.log                a sweep's arm only: its command and output
      ratios/step_XXXXXX.npz   ratio dumps (workdir.ratio_dumps)
      ratios/trace_step_XXXXXX.npz  earlier dumps' rows rescored at that step (log.trace_dumps)
      samples/step_XXXXXX.txt  sample completions
      checkpoints/  tb/        Orbax checkpoints, TensorBoard events

metrics.jsonl may end in a torn line (a killed run) and, after a resume, repeat steps or hold a
record appended to a torn line. `read_metrics` skips undecodable lines (a warning unless it is
the last line), recovers a record glued after a fragment and keeps the last record of a repeated
step; `RunLogger.truncate_after` rewrites the file through it. Pure Python: training imports it.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from calclip_jax.analysis.surge import SURGE_FACTOR, SURGE_WARMUP, SURGE_WINDOW
from calclip_jax.workdir.seed_names import split_seeded_name

T = TypeVar("T")

METRICS_FILE = "metrics.jsonl"
CONFIG_FILE = "config.json"
SUMMARY_FILE = "summary.json"
RUN_INFO_FILE = "run_info.json"
TRAIN_LOG_FILE = "train.log"  # a sweep's arm: the command and its output
RATIOS_DIR = "ratios"
TRACE_PREFIX = "trace_"  # ratios/trace_step_XXXXXX.npz
SAMPLES_DIR = "samples"
CHECKPOINTS_DIR = "checkpoints"
TB_DIR = "tb"
FIGURES_DIR = "figures"
RUN_FILES = (METRICS_FILE, CONFIG_FILE, SUMMARY_FILE)  # any of them makes a folder a run
RESOLVED = "resolved"  # config.json section of values the run resolved


class RunRecordError(ValueError):
    """A run file lacks what the reader needs (the message names the file)."""


def step_file(step: int, ext: str) -> str:
    """step_XXXXXX.<ext>: the name of a per-step file."""
    return f"step_{step:06d}.{ext}"


def step_files(
    folder: str | Path, ext: str, prefix: str = "", last_step: int | None = None
) -> dict[int, Path]:
    """RL step -> file of the <prefix>step_XXXXXX.<ext> files in `folder`, by step ({} if none);
    with `last_step`, only those of steps up to it."""
    found, head = {}, f"{prefix}step_"
    for f in Path(folder).glob(f"{head}*.{ext}"):
        digits = f.name[len(head) : -len(ext) - 1]
        if digits.isdigit() and (last_step is None or int(digits) <= last_step):
            found[int(digits)] = f
    return dict(sorted(found.items()))


def config_path(workdir: str | Path) -> Path:
    return Path(workdir) / CONFIG_FILE


def train_log_path(workdir: str | Path) -> Path:
    return Path(workdir) / TRAIN_LOG_FILE


def summary_path(workdir: str | Path) -> Path:
    return Path(workdir) / SUMMARY_FILE


def checkpoints_path(workdir: str | Path) -> Path:
    return Path(workdir) / CHECKPOINTS_DIR


def checkpoint_steps(workdir: str | Path) -> list[int]:
    """RL steps of the finalized checkpoint folders (orbax renames a step's folder to its
    number once written), without opening them."""
    folder = checkpoints_path(workdir)
    return (
        sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) if folder.is_dir() else []
    )


def ratio_dump_path(workdir: str | Path, step: int) -> Path:
    return Path(workdir) / RATIOS_DIR / step_file(step, "npz")


def trace_path(workdir: str | Path, step: int) -> Path:
    return Path(workdir) / RATIOS_DIR / (TRACE_PREFIX + step_file(step, "npz"))


def sample_path(workdir: str | Path, step: int) -> Path:
    return Path(workdir) / SAMPLES_DIR / step_file(step, "txt")


def metrics_line(row: dict[str, Any]) -> str:
    """One metrics.jsonl line (the writer's format)."""
    return json.dumps(row) + "\n"


def decode_line(line: str) -> dict[str, Any] | None:
    """The object on a metrics line, else the last object glued after a torn fragment, else None."""
    for start in (0, line.rfind("{")):
        try:
            obj = json.loads(line[max(start, 0) :])
        except json.JSONDecodeError:
            continue
        return obj if isinstance(obj, dict) else None
    return None


def read_metrics(workdir: str | Path) -> list[dict[str, Any]]:
    """One record per logged step of workdir/metrics.jsonl, by step ([] when absent)."""
    path = Path(workdir) / METRICS_FILE
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    by_step: dict[int, dict[str, Any]] = {}
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        row = decode_line(line)
        if row is None:
            if i != len(lines) - 1:
                warnings.warn(f"{path}: line {i + 1} is not valid JSON, skipped", stacklevel=2)
            continue
        step = row.get("step")
        if isinstance(step, int | float) and not isinstance(step, bool) and math.isfinite(step):
            by_step[int(step)] = row
    return [by_step[s] for s in sorted(by_step)]


def _load_json(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        warnings.warn(f"{path}: undecodable JSON, ignored", stacklevel=3)
        return None
    return obj if isinstance(obj, dict) else None


def load_config(workdir: str | Path) -> dict[str, Any] | None:
    """config.json as a nested dict, or None."""
    return _load_json(Path(workdir) / CONFIG_FILE)


def load_summary(workdir: str | Path) -> dict[str, Any] | None:
    """summary.json (written only by a finished run), or None."""
    return _load_json(Path(workdir) / SUMMARY_FILE)


def save_summary(workdir: str | Path, summary: dict[str, Any]) -> Path:
    """Writes workdir/summary.json atomically (it marks the run finished)."""
    path = Path(workdir) / SUMMARY_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(summary, indent=2), encoding="utf-8")
    os.replace(tmp, path)
    return path


def remove_summary(workdir: str | Path) -> None:
    """Deletes summary.json: the run is no longer finished (it is being extended)."""
    summary_path(workdir).unlink()


def is_finished(workdir: str | Path) -> bool:
    """A finished run is one whose summary.json exists."""
    return (Path(workdir) / SUMMARY_FILE).exists()


def is_run_dir(path: str | Path) -> bool:
    """Whether `path` holds any run file."""
    return any((Path(path) / f).exists() for f in RUN_FILES)


def load_run_info(workdir: str | Path) -> dict[str, Any] | None:
    """run_info.json ({"starts": [one record per process start]}), or None."""
    return _load_json(Path(workdir) / RUN_INFO_FILE)


def output_paths(workdir: str | Path) -> dict[str, Path]:
    """What a reader looks at, by kind, for the outputs present in `workdir`."""
    root = Path(workdir)
    named = {
        "workdir": root,
        "metrics": root / METRICS_FILE,
        "summary": root / SUMMARY_FILE,
        "tensorboard": root / TB_DIR,
        "samples": root / SAMPLES_DIR,
        "ratio dumps": root / RATIOS_DIR,
        "checkpoints": root / CHECKPOINTS_DIR,
        "figures": root / FIGURES_DIR,
    }
    return {kind: path for kind, path in named.items() if path.exists()}


def find_arms(sweep_dir: str | Path) -> dict[str, Path]:
    """Arm name -> workdir for each direct subdirectory holding a run file, sorted by name."""
    root = Path(sweep_dir)
    if not root.is_dir():
        return {}
    return {d.name: d for d in sorted(root.iterdir()) if d.is_dir() and is_run_dir(d)}


def read_arms_by_seed(sweep_dir: str | Path, read: Callable[[Path], T]) -> dict[str, dict[int, T]]:
    """`read(run folder)` of every arm under `sweep_dir`, by arm and seed (a folder without the
    `__seed<N>` suffix counts as seed 0); runs whose result is empty are left out."""
    out: dict[str, dict[int, T]] = {}
    for name, path in find_arms(sweep_dir).items():
        got = read(path)
        if got:
            arm, seed = split_seeded_name(name)
            out.setdefault(arm, {})[seed or 0] = got
    return out


def find_runs(path: str | Path) -> dict[str, Path]:
    """Arm name -> workdir: `path` itself when it is a run, else its arms (`find_arms`)."""
    path = Path(path)
    return {path.name: path} if is_run_dir(path) else find_arms(path)


def resolved_value(workdir: str | Path, key: str) -> Any:
    """config.json's resolved[key]; RunRecordError naming the file when it is missing."""
    path = Path(workdir) / CONFIG_FILE
    config = load_config(workdir)
    if config is None:
        raise RunRecordError(f"{path}: missing or undecodable, needed for {RESOLVED}.{key}")
    section = config.get(RESOLVED)
    if not isinstance(section, dict) or key not in section:
        raise RunRecordError(f"{path}: lacks {RESOLVED}.{key} (written before that section)")
    return section[key]


def start_checkpoint(workdir: str | Path) -> str | None:
    """config.json's model.checkpoint: the checkpoint the run started from (None: a fresh model,
    or no config.json)."""
    model = (load_config(workdir) or {}).get("model")
    return model.get("checkpoint") if isinstance(model, dict) else None


def clip_bounds(workdir: str | Path) -> tuple[float, float]:
    """The run's static PPO clip bounds (1 - eps_low, 1 + eps_high) after preset resolution."""
    value = resolved_value(workdir, "clip_bounds")
    try:
        lower, upper = (float(v) for v in value)
    except (TypeError, ValueError) as err:
        path = Path(workdir) / CONFIG_FILE
        raise RunRecordError(f"{path}: {RESOLVED}.clip_bounds is not [lower, upper]") from err
    return lower, upper


def surge_settings(config: dict[str, Any] | None) -> tuple[float, int, int]:
    """(factor, warmup, window) of a run's entropy-surge test: its config's log.surge_* knobs,
    the defaults of `analysis.surge` (the schema's) for a config without them."""
    log = (config or {}).get("log") or {}
    return (
        float(log.get("surge_factor", SURGE_FACTOR)),
        int(log.get("surge_warmup", SURGE_WARMUP)),
        int(log.get("surge_window", SURGE_WINDOW)),
    )
