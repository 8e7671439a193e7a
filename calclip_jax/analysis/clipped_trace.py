"""Do tokens clipped on A < 0 at RL step s gain probability later? One trace entry's statistics.

Step s's dumped response tokens fall into three groups: A < 0 with ratio below step s's lower
clip bound (their gradient vanished), A < 0 not clipped, and A > 0. For each, the mean change of
log-prob from the policy step s sampled with (`old_logp_full`) to a later one (the trace's logp),
token-weighted, with a bootstrap interval that resamples rows (`paired.ratio_of_means` on one
"seed" of B rows, blocks of one row). A positive mean for the clipped group is the mechanism:
bad tokens that the clip stopped pushing down grow more likely.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from calclip_jax.analysis.paired import N_BOOT, Interval, ratio_of_means

CLIPPED, UNCLIPPED, POSITIVE = "A<0 clipped", "A<0 not clipped", "A>0"
GROUPS = (CLIPPED, UNCLIPPED, POSITIVE)


@dataclasses.dataclass(frozen=True)
class GroupShift:
    """A token group's count and its mean log-prob change with the interval (NaN when empty)."""

    group: str
    tokens: int
    shift: Interval


def token_groups(
    ratio_BT: np.ndarray, advantages_BT: np.ndarray, mask_BT: np.ndarray, lower: float
) -> dict[str, np.ndarray]:
    """bool [B, T] per group of `GROUPS`: valid tokens by advantage sign, A < 0 split at ratio <
    `lower` (the diagnostics' clip_frac_lower_neg rule); A = 0 tokens are in none."""
    valid = np.asarray(mask_BT).astype(bool)
    adv = np.broadcast_to(advantages_BT, valid.shape)
    neg, clipped = valid & (adv < 0), np.asarray(ratio_BT) < lower
    return {CLIPPED: neg & clipped, UNCLIPPED: neg & ~clipped, POSITIVE: valid & (adv > 0)}


def group_shift(
    name: str, dlogp_BT: np.ndarray, sel_BT: np.ndarray, n_boot: int = N_BOOT, seed: int = 0
) -> GroupShift:
    """Mean of `dlogp_BT` over the selected finite tokens, with its 90% interval over rows."""
    sel = sel_BT & np.isfinite(dlogp_BT)
    num = np.where(sel, dlogp_BT, 0.0).sum(axis=1, dtype=np.float64)[None]
    den = sel.sum(axis=1).astype(np.float64)[None]
    shift = ratio_of_means(num, den, n_boot=n_boot, block=1, seed=seed)
    return GroupShift(name, int(sel.sum()), shift)


def group_shifts(
    dlogp_BT: np.ndarray,
    ratio_BT: np.ndarray,
    advantages_BT: np.ndarray,
    mask_BT: np.ndarray,
    lower: float,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> list[GroupShift]:
    """`group_shift` of each group of `token_groups`, in `GROUPS` order."""
    groups = token_groups(ratio_BT, advantages_BT, mask_BT, lower)
    return [group_shift(g, dlogp_BT, groups[g], n_boot, seed) for g in GROUPS]
