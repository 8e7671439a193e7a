"""Ratio dumps (`ratios/step_XXXXXX.npz`): finding and loading them (`analysis.ratio_noise`
pools them).

A dump holds, for every token of one rollout batch after its updates: `ratio` (trainer
precision), `ratio_ref` (BF16 shadow), `advantages` ([B] or [B, T]), `mask` ([B, T]) and
`old_prob`, all on the whole batch (old and new log-probs under the same composition); runs
since the composition fix also hold `old_logp_full` (the trainer's old log-probs on the whole
batch) and `old_logp_minibatch` (on the first epoch's minibatches, what the updates used); runs
since the clipped-token trace also hold the rows' forward inputs (`ROW_KEYS`, int32 [B, T]).

Runs since the shadow trace also hold `old_logp_ref_full` (the BF16 shadow's old log-probs on the
whole batch). A trace (`ratios/trace_step_XXXXXX.npz`, `log.trace_dumps`) holds, for each earlier
dump's step s, `logp_sXXXXXX` [B, T]: that dump's tokens rescored by the policy after step t's
updates, and (since the shadow trace) `logp_ref_sXXXXXX`: the same in the BF16 shadow.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from calclip_jax.workdir.run_record import RATIOS_DIR, TRACE_PREFIX, step_files

REQUIRED = ("ratio", "advantages", "mask")
ROW_KEYS = ("tokens", "positions", "attn_mask")  # with `mask`: what rescores a dump's rows
TRACE_KEY = "logp_s"
SHADOW_TRACE_KEY = "logp_ref_s"


def dump_steps(workdir: str | Path, last_step: int | None = None) -> dict[int, Path]:
    """RL step -> dump file of a run (empty when it dumped nothing), through `last_step`."""
    return step_files(Path(workdir) / RATIOS_DIR, "npz", last_step=last_step)


def load_dump(path: str | Path) -> dict[str, np.ndarray]:
    """One dump's arrays, advantages broadcast to the [B, T] token grid."""
    with np.load(path) as z:
        data = {k: np.asarray(z[k]) for k in z.files}
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise ValueError(f"{path}: ratio dump lacks {missing}")
    adv = data["advantages"]
    data["advantages"] = np.broadcast_to(adv[:, None] if adv.ndim == 1 else adv, data["mask"].shape)
    return data


def load_dumps(workdir: str | Path) -> list[dict[str, np.ndarray]]:
    """Every dump of a run, in step order."""
    return [load_dump(f) for _, f in sorted(dump_steps(workdir).items())]


def dump_rows(path: str | Path) -> dict[str, np.ndarray] | None:
    """A dump's rows as a forward reads them (`ROW_KEYS` and `response_mask`, int32 like the
    rollout's), or None for a dump written before it held them."""
    with np.load(path) as z:
        if not all(k in z.files for k in ROW_KEYS):
            return None
        rows = {k: np.asarray(z[k], np.int32) for k in ROW_KEYS}
        rows["response_mask"] = np.asarray(z["mask"], np.int32)
    return rows


def trace_key(step: int, shadow: bool = False) -> str:
    """The trace's array of earlier step `step`: logp_sXXXXXX, or the BF16 shadow's
    logp_ref_sXXXXXX."""
    return f"{SHADOW_TRACE_KEY if shadow else TRACE_KEY}{step:06d}"


def trace_steps(workdir: str | Path, last_step: int | None = None) -> dict[int, Path]:
    """RL step t -> trace file of a run (empty when it traced nothing), through `last_step`."""
    return step_files(Path(workdir) / RATIOS_DIR, "npz", TRACE_PREFIX, last_step)


def load_trace(path: str | Path, shadow: bool = False) -> dict[int, np.ndarray]:
    """Earlier step s -> its dump's log-probs under the trace step's policy (with `shadow`, in
    the BF16 shadow: empty for traces written before it was traced), by step."""
    prefix = SHADOW_TRACE_KEY if shadow else TRACE_KEY
    with np.load(path) as z:
        found = {int(k[len(prefix) :]): np.asarray(z[k]) for k in z.files if k.startswith(prefix)}
    return dict(sorted(found.items()))
