"""Metrics of a run as column arrays, and dotted lookups in its config (files: run_record)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from calclip_jax.workdir.run_record import read_metrics


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


def load_columns(workdir: str | Path, last_step: int | None = None) -> dict[str, np.ndarray]:
    """`run_record.read_metrics` as column arrays; with `last_step`, only its rows up to that RL
    step (the run as it stood then)."""
    rows = read_metrics(workdir)
    if last_step is not None:
        rows = [r for r in rows if r["step"] <= last_step]  # read_metrics: every row has one
    return to_columns(rows)


def config_value(config: dict[str, Any] | None, dotted: str, default: Any = None) -> Any:
    """config["a"]["b"] for dotted "a.b"; `default` when any part is missing."""
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node
