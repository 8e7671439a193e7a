"""The headline numbers of a finished run (its summary), from its metrics rows."""

from __future__ import annotations

from typing import Any

import numpy as np

from calclip_jax.analysis.stats import final_value, finite_mean, finite_values, last_finite
from calclip_jax.analysis.surge import SURGE_WINDOW, detect_surge

MEAN_KEYS = (  # metrics summarized by their mean over the steps that logged them
    "clip_frac_lower_neg",
    "clip_frac_lower_neg_ref",
    "clip_frac_upper_pos",
    "clip_frac_upper_pos_ref",
    "mismatch_k3",
)


def summarize(
    rows: list[dict[str, Any]], factor: float, warmup: int, window: int = SURGE_WINDOW
) -> dict[str, Any]:
    """Headline numbers of a finished run from its metrics rows (`run_record.read_metrics`).

    `*_final`: `stats.final_value` (mean over the last FINAL_STEPS steps); `*_mean`: over all
    steps that logged the metric; eval accuracy and entropy: first / last logged value; times:
    `step_timing`.
    """
    column = lambda key: [r.get(key) for r in rows]
    evals, ent = finite_values(column("eval_accuracy")), finite_values(column("entropy"))
    surge = detect_surge(
        column("entropy"), [r["step"] for r in rows], k=factor, warmup=warmup, window=window
    )
    return {
        "final_step": rows[-1]["step"],
        "reward_first": rows[0]["reward_mean"],
        "reward_final": final_value(column("reward_mean")),
        "eval_accuracy_first": float(evals[0]) if evals.size else None,
        "eval_accuracy_last": last_finite(evals),
        "entropy_first": float(ent[0]) if ent.size else None,
        "entropy_last": last_finite(ent),
        "entropy_peak": float(ent.max()) if ent.size else None,
        "entropy_min": float(ent.min()) if ent.size else None,
        "entropy_surge": surge is not None,
        "entropy_surge_step": surge,
        **{f"{name}_mean": finite_mean(column(name)) for name in MEAN_KEYS},
        "garbled_frac_final": final_value(column("garbled_frac")),
        **step_timing(rows),
    }


def step_timing(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """Compile time apart from step time: the first RL step's wall time, the compile seconds of
    all steps (a resumed run compiles again) and the median step time without compiling."""
    wall = [r.get("step_time_s") for r in rows]
    compiling = [r.get("compile_time_s") or 0.0 for r in rows]
    net = [w - c for w, c in zip(wall, compiling, strict=True) if w is not None]
    return {
        "rl_first_step_time_s": wall[0] if rows else None,
        "rl_compile_time_s": float(sum(compiling)),
        "rl_step_time_s_median": float(np.median(net)) if net else None,
    }
