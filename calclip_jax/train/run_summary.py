"""The headline numbers of a finished run (summary.json), from its metrics rows."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from calclip_jax.analysis.surge import SURGE_WINDOW, detect_surge

MEANS = (
    "clip_frac_lower_neg",
    "clip_frac_lower_neg_ref",
    "clip_frac_upper_pos",
    "clip_frac_upper_pos_ref",
    "mismatch_k3",
)


def _mean_or_none(values: list[Any]) -> float | None:
    """Mean of the finite values; None (JSON null) when there is none."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.mean(finite)) if finite else None


def summarize(
    rows: list[dict[str, Any]], factor: float, warmup: int, window: int = SURGE_WINDOW
) -> dict[str, Any]:
    """Headline numbers of a finished run from its metrics rows (surge: analysis.surge)."""
    ent = [r.get("entropy") for r in rows]
    evals = [r["eval_accuracy"] for r in rows if r.get("eval_accuracy") is not None]
    finite_ent = [e for e in ent if e is not None]
    surge = detect_surge(ent, [r["step"] for r in rows], k=factor, warmup=warmup, window=window)
    return {
        "final_step": rows[-1]["step"],
        "reward_first": rows[0]["reward_mean"],
        "reward_last": rows[-1]["reward_mean"],
        "eval_accuracy_first": evals[0] if evals else None,
        "eval_accuracy_last": evals[-1] if evals else None,
        "entropy_first": finite_ent[0] if finite_ent else None,
        "entropy_last": finite_ent[-1] if finite_ent else None,
        "entropy_peak": max(finite_ent) if finite_ent else None,
        "entropy_min": min(finite_ent) if finite_ent else None,
        "entropy_surge": surge is not None,
        "entropy_surge_step": surge,
        **{f"{name}_mean": _mean_or_none([r.get(name) for r in rows]) for name in MEANS},
        "garbled_frac_last": rows[-1].get("garbled_frac"),
    }
