"""Analysis of experiment outputs (pure Python + NumPy; plots import matplotlib on demand).

`from calclip_jax.analysis import plots` for figures and `notebook` for the notebooks' helpers
(IPython); everything else is re-exported here. `run_record` owns a run's files.
"""

from calclip_jax.analysis.metrics import config_value, load_columns, to_columns
from calclip_jax.analysis.ratio_dumps import (
    PROB_EDGES,
    dump_steps,
    load_dump,
    load_dumps,
    noise_by_probability,
    pooled_tokens,
)
from calclip_jax.analysis.run_record import (
    RunRecordError,
    clip_bounds,
    find_arms,
    find_runs,
    is_finished,
    load_config,
    load_summary,
    read_metrics,
    resolved_value,
)
from calclip_jax.analysis.stats import (
    FINAL_STEPS,
    final_value,
    finite_mean,
    finite_stat,
    last_finite,
)
from calclip_jax.analysis.summary import (
    COLUMNS,
    aggregate_seeds,
    summarize_run,
    summarize_sweep,
    to_markdown,
    write_csv,
    write_summary,
)
from calclip_jax.analysis.surge import (
    SURGE_FACTOR,
    SURGE_WARMUP,
    SURGE_WINDOW,
    detect_surge,
    max_rebound,
    running_min,
    surge_mask,
    trailing_mean,
)

__all__ = [
    "COLUMNS",
    "FINAL_STEPS",
    "PROB_EDGES",
    "SURGE_FACTOR",
    "SURGE_WARMUP",
    "SURGE_WINDOW",
    "RunRecordError",
    "aggregate_seeds",
    "clip_bounds",
    "config_value",
    "detect_surge",
    "dump_steps",
    "final_value",
    "find_arms",
    "find_runs",
    "finite_mean",
    "finite_stat",
    "is_finished",
    "last_finite",
    "load_columns",
    "load_config",
    "load_dump",
    "load_dumps",
    "load_summary",
    "max_rebound",
    "noise_by_probability",
    "pooled_tokens",
    "read_metrics",
    "resolved_value",
    "running_min",
    "summarize_run",
    "summarize_sweep",
    "surge_mask",
    "to_columns",
    "to_markdown",
    "trailing_mean",
    "write_csv",
    "write_summary",
]
