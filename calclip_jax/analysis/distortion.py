"""FP8-vs-BF16 distortion of the PPO ratio on identical parameters: the statistics, from arrays.

Inputs are token log-probs of one rollout batch ([B, T], response tokens on `mask`) under
parameters theta_0 (the old policy) .. theta_K, in several precisions, every forward on the
whole batch. Definitions follow section 1 of results/RESULTS.md and `ratio_dumps`:

- log-prob noise at theta_0: ``e = logp_P(theta_0) - logp_BF16(theta_0)``;
- log-ratio at theta_k: ``log r_P = logp_P(theta_k) - logp_P(theta_0)``, each precision against
  its own old policy;
- ratio noise: ``d = log r_P - log r_BF16``;
- a token's old-policy probability: ``exp(logp_BF16(theta_0))``, binned by `PROB_EDGES`;
- clip shares: A<0 tokens with r < lower bound, A>0 tokens with r > upper bound.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from calclip_jax.analysis.ratio_noise import PROB_EDGES

SIGNS = ("neg", "pos")  # A < 0, A > 0 (tokens with A == 0 are counted, not split by sign)
CLIP_WIDTH = math.log(1.2)  # a log-prob difference wider than the clip interval's upper side
Stat = Callable[[np.ndarray], float]


@dataclasses.dataclass(frozen=True)
class Tokens:
    """The response tokens of one batch: where they are, their advantage and old probability."""

    mask: np.ndarray  # [B, T] bool
    advantages: np.ndarray  # [N] float64, per valid token
    old_prob: np.ndarray  # [N] float64, exp(BF16 log-prob at theta_0)

    @classmethod
    def of(cls, mask_BT: np.ndarray, advantages: np.ndarray, ref_logp_BT: np.ndarray) -> Tokens:
        """From the response mask, advantages ([B] or [B, T]) and the BF16 log-probs at theta_0."""
        mask = np.asarray(mask_BT).astype(bool)
        adv = np.asarray(advantages, np.float64)
        adv_BT = np.broadcast_to(adv[:, None] if adv.ndim == 1 else adv, mask.shape)
        return cls(mask, adv_BT[mask], np.exp(np.asarray(ref_logp_BT, np.float64)[mask]))

    def take(self, x_BT: np.ndarray) -> np.ndarray:
        """The valid tokens of a [B, T] array, flat, as float64."""
        return np.asarray(x_BT, np.float64)[self.mask]

    def sign(self, tag: str) -> np.ndarray:
        """bool [N]: A < 0 ("neg") or A > 0 ("pos")."""
        return self.advantages < 0 if tag == "neg" else self.advantages > 0

    def bins(self, edges: Sequence[float] = PROB_EDGES) -> list[np.ndarray]:
        """bool [N] per old-probability bin [lo, hi) of `edges`."""
        p = self.old_prob
        return [(p >= lo) & (p < hi) for lo, hi in itertools.pairwise(edges)]


def std(x: np.ndarray) -> float:
    """Population std (as `noise_by_probability`); NaN when empty."""
    return float(np.std(x)) if x.size else math.nan


def p99_abs(x: np.ndarray) -> float:
    """99th percentile of |x|; NaN when empty."""
    return float(np.percentile(np.abs(x), 99)) if x.size else math.nan


def mean(x: np.ndarray) -> float:
    """Mean; NaN when empty."""
    return float(np.mean(x)) if x.size else math.nan


def share_over(width: float) -> Stat:
    """The share of |x| > width; NaN when empty."""
    return lambda x: float(np.mean(np.abs(x) > width)) if x.size else math.nan


def by_sign(values: np.ndarray, tokens: Tokens, stat: Stat) -> dict[str, float]:
    """{"neg": stat of A<0 tokens, "pos": stat of A>0 tokens}; `values` flat ([N])."""
    return {tag: stat(values[tokens.sign(tag)]) for tag in SIGNS}


def by_sign_and_bin(
    values: np.ndarray, tokens: Tokens, stat: Stat, edges: Sequence[float] = PROB_EDGES
) -> dict[str, list[float]]:
    """{"neg": [stat per probability bin], "pos": [...]}; `values` flat ([N])."""
    bins = tokens.bins(edges)
    return {tag: [stat(values[tokens.sign(tag) & b]) for b in bins] for tag in SIGNS}


def token_counts(tokens: Tokens, edges: Sequence[float] = PROB_EDGES) -> dict[str, Any]:
    """Valid tokens in all, per sign (and A == 0), and per sign and probability bin."""
    count = lambda x: int(x.size)
    zero = tokens.advantages == 0
    return {
        "total": int(tokens.advantages.size),
        **{tag: int(tokens.sign(tag).sum()) for tag in SIGNS},
        "zero": int(zero.sum()),
        "by_bin": by_sign_and_bin(tokens.advantages, tokens, count, edges),
    }


def logp_noise(
    logp_BT: np.ndarray,
    ref_logp_BT: np.ndarray,
    tokens: Tokens,
    width: float = CLIP_WIDTH,
    edges: Sequence[float] = PROB_EDGES,
) -> dict[str, Any]:
    """Precision noise of the log-probs, e = logp - ref_logp: mean, std, p99 |e| and the share
    of |e| > `width`, by sign; std and p99 |e| by sign and probability bin."""
    e = tokens.take(logp_BT) - tokens.take(ref_logp_BT)
    over = share_over(width)
    return {
        "mean": by_sign(e, tokens, mean),
        "std": by_sign(e, tokens, std),
        "p99_abs": by_sign(e, tokens, p99_abs),
        "share_over_width": {**by_sign(e, tokens, over), "all": over(e)},
        "std_by_bin": by_sign_and_bin(e, tokens, std, edges),
        "p99_abs_by_bin": by_sign_and_bin(e, tokens, p99_abs, edges),
    }


def log_ratio(logp_BT: np.ndarray, old_logp_BT: np.ndarray, tokens: Tokens) -> np.ndarray:
    """log r of the valid tokens, flat ([N])."""
    return tokens.take(logp_BT) - tokens.take(old_logp_BT)


def ratio_noise(
    log_r: np.ndarray, log_r_ref: np.ndarray, tokens: Tokens, edges: Sequence[float] = PROB_EDGES
) -> dict[str, Any]:
    """The ratio noise d = log_r - log_r_ref (flat [N]): std by sign, and by sign and bin."""
    d = log_r - log_r_ref
    return {"std": by_sign(d, tokens, std), "std_by_bin": by_sign_and_bin(d, tokens, std, edges)}


def inflation(share: float, share_ref: float) -> float | None:
    """share / share_ref; None where it has no finite value (reference share 0 or NaN)."""
    if not share_ref > 0 or not math.isfinite(share):
        return None
    return share / share_ref


def clip_shares(
    log_r: np.ndarray,
    log_r_ref: np.ndarray,
    tokens: Tokens,
    bounds: tuple[float, float],
    edges: Sequence[float] = PROB_EDGES,
) -> dict[str, Any]:
    """Share of A<0 tokens below the lower bound and of A>0 tokens above the upper bound, for
    log_r and the reference log_r_ref (flat [N]), their ratio, and the lower share by bin."""
    lower, upper = math.log(bounds[0]), math.log(bounds[1])
    below = lambda x: float(np.mean(x < lower)) if x.size else math.nan
    above = lambda x: float(np.mean(x > upper)) if x.size else math.nan
    neg, pos = tokens.sign("neg"), tokens.sign("pos")
    out: dict[str, Any] = {
        "lower_neg": below(log_r[neg]),
        "lower_neg_ref": below(log_r_ref[neg]),
        "upper_pos": above(log_r[pos]),
        "upper_pos_ref": above(log_r_ref[pos]),
        "lower_neg_by_bin": by_sign_and_bin(log_r, tokens, below, edges)["neg"],
        "lower_neg_ref_by_bin": by_sign_and_bin(log_r_ref, tokens, below, edges)["neg"],
    }
    out["lower_neg_inflation"] = inflation(out["lower_neg"], out["lower_neg_ref"])
    out["upper_pos_inflation"] = inflation(out["upper_pos"], out["upper_pos_ref"])
    return out


def unit_ratio_gap(old_logp_BT: np.ndarray, logp0_BT: np.ndarray, tokens: Tokens) -> float:
    """max |log r| at theta_0: old log-probs vs a second forward of the same parameters, same
    precision, same batch; 0 exactly when the forward is deterministic."""
    gap = np.abs(log_ratio(logp0_BT, old_logp_BT, tokens))
    return float(gap.max()) if gap.size else 0.0


def distortion_stats(
    old_logp: Mapping[str, np.ndarray],
    logp: Mapping[str, np.ndarray],
    mask_BT: np.ndarray,
    advantages: np.ndarray,
    bounds: tuple[float, float],
    reference: str = "bf16",
    width: float = CLIP_WIDTH,
    edges: Sequence[float] = PROB_EDGES,
) -> dict[str, Any]:
    """All the statistics of one batch. `old_logp[P]`: [B, T] log-probs at theta_0 in precision
    P; `logp[P]`: [K + 1, B, T] at theta_0 (a second forward) .. theta_K; `reference` is one of
    the precisions. Per precision other than the reference: the log-prob noise at theta_0, and
    per k = 1..K the ratio noise and clip shares against the reference."""
    ref_old, ref_logp = old_logp[reference], logp[reference]
    tokens = Tokens.of(mask_BT, advantages, ref_old)
    ref_log_r = [log_ratio(x, ref_old, tokens) for x in ref_logp]
    out: dict[str, Any] = {
        "tokens": token_counts(tokens, edges),
        "unit_ratio_gap": {p: unit_ratio_gap(old_logp[p], logp[p][0], tokens) for p in logp},
        "update_size": [  # how far the reference ratio moved: std of log r_BF16 by sign
            by_sign(x, tokens, std) for x in ref_log_r[1:]
        ],
        "precisions": {},
    }
    for p in logp:
        if p == reference:
            continue
        per_k = []
        for k in range(1, len(logp[p])):
            log_r = log_ratio(logp[p][k], old_logp[p], tokens)
            per_k.append(
                {
                    "k": k,
                    "ratio_noise": ratio_noise(log_r, ref_log_r[k], tokens, edges),
                    "clip": clip_shares(log_r, ref_log_r[k], tokens, bounds, edges),
                }
            )
        out["precisions"][p] = {
            "logp_noise": logp_noise(old_logp[p], ref_old, tokens, width, edges),
            "updates": per_k,
        }
    return out
