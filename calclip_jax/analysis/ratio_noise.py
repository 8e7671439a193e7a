"""The precision noise of the ratio, from ratio dumps' arrays: ``d = log ratio - log ratio_ref``,
how far the trainer's ratio is from what BF16 forwards of the same parameters give; pooled over
dumps and binned by the token's old-policy probability.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

PROB_EDGES = (0.0, 0.05, 0.2, 0.5, 0.9, 0.99, 1.0001)  # old-policy probability bins


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
