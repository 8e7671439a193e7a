"""Ratio dumps (`ratios/step_XXXXXX.npz`): loading, pooling, and the precision noise of the ratio.

A dump holds, for every token of one rollout batch after its updates: `ratio` (trainer
precision), `ratio_ref` (BF16 shadow), `advantages` ([B] or [B, T]), `mask` ([B, T]) and
`old_prob`, all on the whole batch (old and new log-probs under the same composition); runs
since the composition fix also hold `old_logp_full` (the trainer's old log-probs on the whole
batch) and `old_logp_minibatch` (on the first epoch's minibatches, what the updates used). The
precision noise of a token is ``d = log ratio - log ratio_ref``: how far the
trainer's ratio is from what BF16 forwards of the same parameters give.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from calclip_jax.analysis.run_record import RATIOS_DIR, step_files

REQUIRED = ("ratio", "advantages", "mask")
PROB_EDGES = (0.0, 0.05, 0.2, 0.5, 0.9, 0.99, 1.0001)  # old-policy probability bins


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


def pooled_tokens(dumps: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Response tokens of all dumps as flat arrays (ratio, ratio_ref, advantages, old_prob, and
    the noise d where both ratios are present and positive)."""
    keys = ("ratio", "ratio_ref", "advantages", "old_prob")
    out: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    for dump in dumps:
        mask = dump["mask"].astype(bool)
        for k in keys:
            if k in dump:
                out[k].append(np.asarray(dump[k])[mask])
    flat = {k: np.concatenate(v) for k, v in out.items() if v}
    if "ratio" in flat and "ratio_ref" in flat:
        with np.errstate(divide="ignore", invalid="ignore"):
            flat["noise"] = np.log(flat["ratio"]) - np.log(flat["ratio_ref"])
    return flat


def noise_by_probability(
    tokens: dict[str, np.ndarray], edges: Sequence[float] = PROB_EDGES
) -> dict[str, np.ndarray]:
    """Std of the noise d per old-probability bin, for A<0 and A>0 tokens (NaN for empty bins):
    {"std_neg", "std_pos", "n_neg", "n_pos"}, one entry per bin of `edges`."""
    d, adv, prob = tokens["noise"], tokens["advantages"], tokens["old_prob"]
    ok = np.isfinite(d)
    out: dict[str, list[float]] = {"std_neg": [], "std_pos": [], "n_neg": [], "n_pos": []}
    for lo, hi in itertools.pairwise(edges):
        in_bin = ok & (prob >= lo) & (prob < hi)
        for tag, sign in (("neg", adv < 0), ("pos", adv > 0)):
            sel = in_bin & sign
            out[f"n_{tag}"].append(float(sel.sum()))
            out[f"std_{tag}"].append(float(d[sel].std()) if sel.any() else np.nan)
    return {k: np.array(v) for k, v in out.items()}
