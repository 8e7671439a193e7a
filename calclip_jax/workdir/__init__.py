"""A run folder, writing and reading: its layout and the one tolerant reader (`run_record`), the
metrics / samples / ratio-dump writer with its TensorBoard and W&B sinks (`run_logger`),
checkpoints and their checksums, the lock, the config record and run info. Nothing outside this
package knows a file name inside a run folder.
"""

from calclip_jax.workdir.ratio_dumps import dump_steps, load_dump, load_dumps
from calclip_jax.workdir.run_record import (
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

__all__ = [
    "RunRecordError",
    "clip_bounds",
    "dump_steps",
    "find_arms",
    "find_runs",
    "is_finished",
    "load_config",
    "load_dump",
    "load_dumps",
    "load_summary",
    "read_metrics",
    "resolved_value",
]
