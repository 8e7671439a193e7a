"""Readers of many run folders, and what they make: summary tables, figures, the distortion
report, the notebooks' helpers and the study's tables (`study`).

`from calclip_jax.reports import plots` for figures (matplotlib) and `notebook` for the
notebooks' helpers (IPython); the summary tables are re-exported here.
"""

from calclip_jax.reports.metrics import config_value, load_columns, to_columns
from calclip_jax.reports.summary import (
    COLUMNS,
    aggregate_seeds,
    summarize_run,
    summarize_sweep,
    to_markdown,
    write_csv,
    write_summary,
)

__all__ = [
    "COLUMNS",
    "aggregate_seeds",
    "config_value",
    "load_columns",
    "summarize_run",
    "summarize_sweep",
    "to_columns",
    "to_markdown",
    "write_csv",
    "write_summary",
]
