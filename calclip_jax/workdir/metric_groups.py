"""TensorBoard / W&B tags: each metrics.jsonl key under one of four groups.

    eval/      greedy evaluation (eval_accuracy -> eval/accuracy)
    calib/     Calibrated Clipping and the clip bounds it carries (calib_q_lower, clip_lower)
    mismatch/  rollout-trainer mismatch and its corrections (mismatch_k3, is_weight_mean, ...)
    train/     everything else (reward, entropy, clip fractions, losses, timings)

metrics.jsonl keeps the flat keys; only the dashboards see the tags.
"""

from __future__ import annotations

GROUPS = ("train", "eval", "calib", "mismatch")
CALIB_KEYS = frozenset({"calibrated", "clip_lower", "clip_upper"})
MISMATCH_KEYS = frozenset(
    {
        "max_prob_diff",
        "token_mult_prob_error",
        "tis_trunc_frac",
        "old_logp_recompute_gap",
        "old_logp_recompute_gap_frac",
    }
)
MISMATCH_PREFIXES = ("mismatch_", "is_")


def tag(key: str) -> str:
    """The dashboard tag of a metrics key: "<group>/<name>"."""
    if key.startswith("eval_"):
        return "eval/" + key.removeprefix("eval_")
    if key.startswith("calib_"):
        return "calib/" + key.removeprefix("calib_")
    if key in CALIB_KEYS:
        return "calib/" + key
    if key in MISMATCH_KEYS or key.startswith(MISMATCH_PREFIXES):
        return "mismatch/" + key
    return "train/" + key
