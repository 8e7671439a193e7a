"""What the notebooks share: the runs of a directory with their summary rows, figures, tables.

Displays through IPython (imported on use); not re-exported by `calclip_jax.analysis`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from calclip_jax.reports.metrics import config_value, load_columns
from calclip_jax.reports.summary import summarize_run, to_markdown
from calclip_jax.workdir import run_record as R
from calclip_jax.workdir.ratio_dumps import load_dump

STATUS_TEXT = {"finished": "finished", "incomplete": "incomplete", "missing": "no metrics yet"}


class RunSet(NamedTuple):
    """Arm name -> workdir, summary row, config (None if absent) and metric columns."""

    runs: dict[str, Path]
    rows: dict[str, dict[str, Any]]
    configs: dict[str, dict[str, Any] | None]
    cols: dict[str, dict[str, np.ndarray]]


def _markdown(text: str) -> None:
    from IPython.display import Markdown, display

    display(Markdown(text))


def load_run_set(results: str | Path) -> RunSet:
    """The runs of `results` (a sweep or one workdir), each row with its status in words and
    `planned_steps`; prints how many are finished, or says that there are none."""
    results = Path(results)
    runs = R.find_runs(results)
    rows = {arm: summarize_run(wd, arm) for arm, wd in runs.items()}
    configs = {arm: R.load_config(wd) for arm, wd in runs.items()}
    cols = {arm: load_columns(wd) for arm, wd in runs.items()}
    for arm, row in rows.items():
        row["status"] = STATUS_TEXT.get(row["status"], row["status"])
        row["planned_steps"] = config_value(configs[arm], "train.steps")
    if runs:
        done = sum(r["status"] == "finished" for r in rows.values())
        noun = "run" if len(runs) == 1 else "runs"
        print(f"{results}: {len(runs)} {noun}, {done} finished, {len(runs) - done} not finished")
    else:
        _markdown(
            f"**No runs found in `{results}`.** Set `CALCLIP_RESULTS` to a sweep "
            "directory or a run's workdir; the cells below then show nothing."
        )
    return RunSet(runs, rows, configs, cols)


def show(fig: Any, name: str, fig_dir: str | Path | None = None) -> None:
    """Displays a figure inline (and saves it as fig_dir/<name>.png when fig_dir is set)."""
    import matplotlib.pyplot as plt

    if fig_dir:
        Path(fig_dir).mkdir(parents=True, exist_ok=True)
        fig.savefig(Path(fig_dir) / f"{name}.png", dpi=110, bbox_inches="tight")
    plt.show()


def table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    """Markdown table of summary rows (missing values as '-')."""
    _markdown(to_markdown(rows, columns) if rows else "_(no rows)_")


def load_dump_or_none(path: str | Path) -> dict[str, np.ndarray] | None:
    """`ratio_dumps.load_dump`, or None (said) for a dump that lacks required arrays."""
    try:
        return load_dump(path)
    except ValueError as err:
        print(f"{err}: skipped")
        return None


def static_bounds(workdir: str | Path) -> tuple[float, float] | None:
    """`run_record.clip_bounds` of a run, or None (said) when its config.json lacks them."""
    try:
        return R.clip_bounds(workdir)
    except R.RunRecordError as err:
        print(f"{err}: static bounds not drawn")
        return None
