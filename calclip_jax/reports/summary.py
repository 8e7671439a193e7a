"""One summary row per arm of a sweep, written as CSV and Markdown.

Choices: final reward = `stats.final_value` of `reward_mean` (mean over the last FINAL_STEPS
logged steps); final eval accuracy = the last logged `eval_accuracy` (summary.json's
`eval_accuracy_last` if metrics has none); peak entropy = max over all steps (the first step when
entropy only falls); clip fractions and `mismatch_k3` = means over the steps that logged them
(`_ref` columns: the BF16-shadow values, logged only on calibrated steps); wall time from
summary.json, else the sum of `step_time_s`. The surge uses the run's own `log.surge_factor` /
`log.surge_warmup` / `log.surge_window` if its config.json has them.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from calclip_jax.analysis.run_summary import MEAN_KEYS
from calclip_jax.analysis.stats import final_value, finite_mean, finite_stat, last_finite
from calclip_jax.analysis.surge import detect_surge
from calclip_jax.reports import metrics as M
from calclip_jax.workdir import run_record as R
from calclip_jax.workdir.seed_names import split_seeded_name

CONFIG_KEYS = {  # column -> dotted key of config.json
    "rollout_precision": "rollout.precision",
    "train_precision": "train.precision",
    "correction": "correction.mode",
    "calibration": "calibration.enabled",
    "upper_rule": "calibration.upper_rule",
    "rl_preset": "rl.preset",
    "seed": "seed",
}
COLUMNS = (
    "arm",
    "status",
    "final_step",
    *CONFIG_KEYS,
    "final_reward",
    "final_eval_accuracy",
    "entropy_peak",
    "entropy_surge",
    "entropy_surge_step",
    *MEAN_KEYS,
    "wall_time_s",
)


def summarize_run(
    workdir: str | Path,
    name: str | None = None,
    *,
    surge_k: float | None = None,
    surge_warmup: int | None = None,
    surge_window: int | None = None,
) -> dict[str, Any]:
    """Summary row (keys: COLUMNS) of one run; status finished | incomplete | missing."""
    workdir = Path(workdir)
    cols = M.load_columns(workdir)
    config, summary = R.load_config(workdir), R.load_summary(workdir)
    status = "finished" if summary is not None else ("incomplete" if cols else "missing")
    row: dict[str, Any] = {"arm": name or workdir.name, "status": status}
    steps = cols.get("step")
    row["final_step"] = int(steps[-1]) if steps is not None and steps.size else None
    for column, dotted in CONFIG_KEYS.items():
        value = M.config_value(config, dotted)
        row[column] = value.lower() if column == "calibration" and isinstance(value, str) else value

    row["final_reward"] = final_value(cols.get("reward_mean"))
    row["final_eval_accuracy"] = last_finite(cols.get("eval_accuracy"))
    if row["final_eval_accuracy"] is None and summary is not None:
        row["final_eval_accuracy"] = finite_mean([summary.get("eval_accuracy_last")])

    entropy = cols.get("entropy")
    row["entropy_peak"] = finite_stat(entropy, np.max)
    own_k, own_warmup, own_window = R.surge_settings(config)
    k = own_k if surge_k is None else surge_k
    warmup = own_warmup if surge_warmup is None else surge_warmup
    window = own_window if surge_window is None else surge_window
    surge_step = (
        None if entropy is None else detect_surge(entropy, steps, k=k, warmup=warmup, window=window)
    )
    row["entropy_surge"] = None if entropy is None else surge_step is not None
    row["entropy_surge_step"] = surge_step
    for key in MEAN_KEYS:
        row[key] = finite_mean(cols.get(key))
    wall = finite_mean([summary.get("wall_time_s")]) if summary else None
    row["wall_time_s"] = wall if wall is not None else finite_stat(cols.get("step_time_s"), np.sum)
    return row


def summarize_sweep(
    sweep_dir: str | Path,
    arms: Sequence[str] | None = None,
    *,
    failed: Iterable[str] = (),
    **surge_options: Any,
) -> list[dict[str, Any]]:
    """Rows for `arms` (default: the arms found in `sweep_dir`); `failed` arms get that status."""
    sweep_dir = Path(sweep_dir)
    names = list(arms) if arms is not None else list(R.find_arms(sweep_dir))
    failed = set(failed)
    rows = []
    for name in names:
        row = summarize_run(sweep_dir / name, name, **surge_options)
        if name in failed:
            row["status"] = "failed"
        rows.append(row)
    return rows


def aggregate_seeds(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Groups `<arm>__seed<N>` rows by arm: n_seeds, mean and `<col>_std` of numeric columns.

    entropy_surge becomes the fraction of seeds with a surge; constant text columns are kept.
    """
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(split_seeded_name(row["arm"])[0], []).append(row)
    out = []
    for arm, group in groups.items():
        agg: dict[str, Any] = {"arm": arm, "n_seeds": len(group)}
        for col in COLUMNS[1:]:
            values = [r.get(col) for r in group]
            if col in ("seed", "entropy_surge_step", "final_step"):
                continue
            if all(isinstance(v, bool) for v in values):
                agg[col] = float(np.mean(values)) if col == "entropy_surge" else values[0]
            elif all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
                agg[col] = float(np.mean(values))
                agg[f"{col}_std"] = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
            elif len({str(v) for v in values}) == 1:
                agg[col] = values[0]
        out.append(agg)
    return out


def format_value(value: Any) -> str:
    """Table cell: '-' for None, yes/no for bools, 4 significant digits for floats."""
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _columns_of(rows: Sequence[dict[str, Any]]) -> list[str]:
    cols: dict[str, None] = {}
    for row in rows:
        cols.update(dict.fromkeys(row))
    return list(cols)


def to_markdown(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> str:
    """A GitHub Markdown table of `rows`."""
    columns = list(columns) if columns is not None else _columns_of(rows)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(format_value(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def write_csv(rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """CSV with one row per dict (None -> empty cell, full float precision)."""
    path = Path(path)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=_columns_of(rows) or list(COLUMNS))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return path


def write_summary(
    sweep_dir: str | Path, rows: Sequence[dict[str, Any]] | None = None
) -> tuple[Path, Path]:
    """Writes sweep_dir/summary.csv and summary.md (plus a per-arm seed table when seeded)."""
    sweep_dir = Path(sweep_dir)
    rows = summarize_sweep(sweep_dir) if rows is None else rows
    csv_path = write_csv(rows, sweep_dir / "summary.csv")
    text = f"# Sweep summary: {sweep_dir.name}\n\n{to_markdown(rows, COLUMNS)}"
    if any(split_seeded_name(r["arm"])[1] is not None for r in rows):
        text += f"\n## Mean and std over seeds\n\n{to_markdown(aggregate_seeds(rows))}"
    md_path = sweep_dir / "summary.md"
    md_path.write_text(text, encoding="utf-8")
    return csv_path, md_path
