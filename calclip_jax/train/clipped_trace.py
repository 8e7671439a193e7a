"""The clipped-token trace (`log.trace_dumps`): do tokens clipped on A < 0 gain probability later?

At a ratio-dump step t, the policy after t's updates rescores the rows of the N latest earlier
ratio dumps (steps t - k * log.ratios_every while that knob is unchanged), read back from their
files, so a resumed run traces as an uninterrupted one. Each dumped batch is scored whole in the
trainer's precision, the composition of its `old_logp_full` (`PPOUpdater.whole_batch_logp`), with
the parameters and FP8 state after step t (`TrainState.fp8_meta`: with frozen delayed scales, the
amaxes the next batch scales from), and again in the BF16 shadow (against the dump's
`old_logp_ref_full`: the change of the policy without FP8's noise in it). `analysis.clipped_trace`
reads logp_now - old_logp_full.
Every process rescores (the forward is a collective) from the shared workdir; the leader writes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from calclip_jax.train.ppo_update import PPOUpdater
from calclip_jax.train.state import TrainState
from calclip_jax.workdir.ratio_dumps import dump_rows, dump_steps, trace_key
from calclip_jax.workdir.run_logger import RunLogger

LogProbs = Callable[[dict[str, np.ndarray]], np.ndarray]  # rows -> logp [B, T]


def earlier_dumps(workdir: str | Path, step: int, count: int) -> dict[int, Path]:
    """The `count` latest ratio dumps of steps before `step`, by step."""
    found = dump_steps(workdir)
    before = [s for s in found if s < step][-count:] if count > 0 else []
    return {s: found[s] for s in before}


def rescore_dumps(
    workdir: str | Path,
    step: int,
    count: int,
    logp: LogProbs,
    shadow_logp: LogProbs | None = None,
) -> dict[str, np.ndarray]:
    """`trace_key(s)` -> `logp` of dump s's rows (float32 [B, T]) for the `count` latest dumps
    before `step`, and with `shadow_logp` `trace_key(s, shadow=True)` -> its log-probs; dumps
    written before they held their rows are left out."""
    out = {}
    for s, path in earlier_dumps(workdir, step, count).items():
        rows = dump_rows(path)
        if rows is None:
            continue
        out[trace_key(s)] = np.asarray(logp(rows), np.float32)
        if shadow_logp is not None:
            out[trace_key(s, shadow=True)] = np.asarray(shadow_logp(rows), np.float32)
    return out


def write_trace(
    logger: RunLogger, updater: PPOUpdater, state: TrainState, step: int, count: int
) -> None:
    """Rescores the `count` latest dumps before `step` at `state`, in the trainer's precision and
    in the BF16 shadow, and writes the trace of `step` (nothing when there is no earlier dump)."""
    score = lambda rows: updater.whole_batch_logp(state.params, state.fp8_meta, rows)
    shadow = lambda rows: updater.whole_batch_shadow_logp(state.params, rows)
    trace = rescore_dumps(logger.workdir, step, count, score, shadow)
    if trace:
        logger.write_trace(step, trace)
