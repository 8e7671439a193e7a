"""Load what `experiments.train` writes into a workdir (see spec EXPERIMENTS.md).

metrics.jsonl may end in a truncated line (a killed run) and, after a resume, may repeat steps or
have a record appended to the truncated line: undecodable lines are skipped (a warning unless it is
the last line), a record glued after a fragment is recovered, and a repeated step keeps its last
record.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np

METRICS_FILE = "metrics.jsonl"
CONFIG_FILE = "config.json"
SUMMARY_FILE = "summary.json"
_RUN_FILES = (METRICS_FILE, CONFIG_FILE, SUMMARY_FILE)


def _decode(line: str) -> Any:
    """A JSON line, or the last flat object on it (a resume appended to a truncated line)."""
    for start in (0, line.rfind("{")):
        try:
            return json.loads(line[max(start, 0) :])
        except json.JSONDecodeError:
            continue
    return None


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """JSON objects of a .jsonl file; skips undecodable lines (a truncated tail is expected)."""
    lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    records = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        obj = _decode(line)
        if obj is None:
            if i != len(lines) - 1:
                warnings.warn(f"{path}: line {i + 1} is not valid JSON, skipped", stacklevel=2)
            continue
        if isinstance(obj, dict):
            records.append(obj)
    return records


def load_metrics(workdir: str | Path) -> list[dict[str, Any]]:
    """Per-step records of `workdir/metrics.jsonl`, sorted by step, one per step ([] if absent)."""
    path = Path(workdir) / METRICS_FILE
    if not path.exists():
        return []
    by_step: dict[int, dict[str, Any]] = {}
    for rec in read_jsonl(path):
        if isinstance(rec.get("step"), int | float):
            by_step[int(rec["step"])] = rec
    return [by_step[s] for s in sorted(by_step)]


def to_columns(records: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Column arrays: float64 with NaN for missing/null (so sparse eval_accuracy aligns with step).

    "step" is int64; a key whose values are not all numeric/null becomes an object array.
    """
    keys: dict[str, None] = {}
    for rec in records:
        keys.update(dict.fromkeys(rec))
    cols: dict[str, np.ndarray] = {}
    for key in keys:
        values = [rec.get(key) for rec in records]
        numeric = all(v is None or (isinstance(v, int | float)) for v in values)
        if numeric:
            cols[key] = np.array([np.nan if v is None else float(v) for v in values])
        else:
            cols[key] = np.array(values, dtype=object)
    if "step" in cols:
        cols["step"] = cols["step"].astype(np.int64)
    return cols


def load_columns(workdir: str | Path) -> dict[str, np.ndarray]:
    """`load_metrics` as column arrays."""
    return to_columns(load_metrics(workdir))


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
    """The resolved config (config.json) as a nested dict, or None."""
    return _load_json(Path(workdir) / CONFIG_FILE)


def load_summary(workdir: str | Path) -> dict[str, Any] | None:
    """summary.json (written only by a completed run), or None."""
    return _load_json(Path(workdir) / SUMMARY_FILE)


def is_finished(workdir: str | Path) -> bool:
    """A finished arm is one whose summary.json exists."""
    return (Path(workdir) / SUMMARY_FILE).exists()


def config_value(config: dict[str, Any] | None, dotted: str, default: Any = None) -> Any:
    """config["a"]["b"] for dotted "a.b"; `default` when any part is missing."""
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def find_arms(sweep_dir: str | Path) -> dict[str, Path]:
    """Arm name -> workdir for each direct subdirectory holding a run file, sorted by name."""
    root = Path(sweep_dir)
    if not root.is_dir():
        return {}
    return {
        d.name: d
        for d in sorted(root.iterdir())
        if d.is_dir() and any((d / f).exists() for f in _RUN_FILES)
    }


def finite_or_none(x: float | None) -> float | None:
    """x as a float, or None when missing or not finite."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None
