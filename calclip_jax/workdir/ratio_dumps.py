"""Ratio dumps (`ratios/step_XXXXXX.npz`): finding and loading them (`analysis.ratio_noise`
pools them).

A dump holds, for every token of one rollout batch after its updates: `ratio` (trainer
precision), `ratio_ref` (BF16 shadow), `advantages` ([B] or [B, T]), `mask` ([B, T]) and
`old_prob`, all on the whole batch (old and new log-probs under the same composition); runs
since the composition fix also hold `old_logp_full` (the trainer's old log-probs on the whole
batch) and `old_logp_minibatch` (on the first epoch's minibatches, what the updates used).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from calclip_jax.workdir.run_record import RATIOS_DIR, step_files

REQUIRED = ("ratio", "advantages", "mask")


def dump_steps(workdir: str | Path) -> dict[int, Path]:
    """RL step -> dump file of a run (empty when it dumped nothing)."""
    return step_files(Path(workdir) / RATIOS_DIR, "npz")


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
