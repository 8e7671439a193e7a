"""Analysis of experiment outputs (pure Python + NumPy; plots import matplotlib on demand).

`from calclip_jax.analysis import plots` for figures; everything else is re-exported here.
"""

from calclip_jax.analysis.metrics import (
    config_value,
    find_arms,
    is_finished,
    load_columns,
    load_config,
    load_metrics,
    load_summary,
    read_jsonl,
    to_columns,
)
from calclip_jax.analysis.ratio_dumps import (
    PROB_EDGES,
    dump_steps,
    load_dump,
    load_dumps,
    noise_by_probability,
    pooled_tokens,
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
    "PROB_EDGES",
    "SURGE_FACTOR",
    "SURGE_WARMUP",
    "SURGE_WINDOW",
    "aggregate_seeds",
    "config_value",
    "detect_surge",
    "dump_steps",
    "find_arms",
    "is_finished",
    "load_columns",
    "load_config",
    "load_dump",
    "load_dumps",
    "load_metrics",
    "load_summary",
    "max_rebound",
    "noise_by_probability",
    "pooled_tokens",
    "read_jsonl",
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
