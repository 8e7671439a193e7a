"""Do tokens clipped on A < 0 at RL step s gain probability later? One trace entry's statistics.

Step s's dumped response tokens fall into three groups: A < 0 with ratio below step s's lower
clip bound (their gradient vanished), A < 0 not clipped, and A > 0. For each, the mean change of
log-prob to a later policy (the trace's logp), token-weighted, with a bootstrap interval that
resamples rows (`paired.ratio_of_means` on one "seed" of B rows, blocks of one row): `shift`
from the policy step s sampled with (`old_logp_full`), `after` from the policy step s's updates
left (old_logp_full + log r, r the dump's ratio), so step s's own push is not in it, and
`shadow_after`, the same in the BF16 shadow (old_logp_ref_full + log r_ref to the shadow's logp).
A clipped group gaining more than the A<0 tokens the clip let through is the mechanism: bad tokens
the clip stopped pushing down grow more likely. Clipped tokens are picked for a low trainer log r:
where r carries FP8 noise, the trainer's `after` also holds that noise not recurring (regression
to the mean); the shadow's does not (its log-probs carry no FP8 noise).
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
    shift: Interval  # since the policy that sampled step s
    after: Interval  # since the end of step s's updates
    shadow_after: Interval  # the same in the BF16 shadow (NaN: not traced)


def token_groups(
    ratio_BT: np.ndarray, advantages_BT: np.ndarray, mask_BT: np.ndarray, lower: float
) -> dict[str, np.ndarray]:
    """bool [B, T] per group of `GROUPS`: valid tokens by advantage sign, A < 0 split at ratio <
    `lower` (the diagnostics' clip_frac_lower_neg rule); A = 0 tokens are in none."""
    valid = np.asarray(mask_BT).astype(bool)
    adv = np.broadcast_to(advantages_BT, valid.shape)
    neg, clipped = valid & (adv < 0), np.asarray(ratio_BT) < lower
    return {CLIPPED: neg & clipped, UNCLIPPED: neg & ~clipped, POSITIVE: valid & (adv > 0)}


def row_sums(values_BT: np.ndarray, sel_BT: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sum of `values_BT` over each row's selected finite tokens, their count): float64 [B]."""
    sel = sel_BT & np.isfinite(values_BT)
    num = np.where(sel, values_BT, 0.0).sum(axis=1, dtype=np.float64)
    return num, sel.sum(axis=1).astype(np.float64)


def step_log_ratio(ratio_BT: np.ndarray) -> np.ndarray:
    """log r of the dump's ratios: how far step s's own updates moved each token."""
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(ratio_BT, np.float64))


def group_shift(
    name: str,
    dlogp_BT: np.ndarray,
    logr_BT: np.ndarray,
    sel_BT: np.ndarray,
    n_boot: int = N_BOOT,
    seed: int = 0,
    shadow_after_BT: np.ndarray | None = None,
) -> GroupShift:
    """Means of `dlogp_BT`, `dlogp_BT - logr_BT` and `shadow_after_BT` (NaN when None) over the
    selected finite tokens, with their 90% intervals over rows."""
    boot = {"n_boot": n_boot, "block": 1, "seed": seed}
    mean = lambda values: ratio_of_means(*(x[None] for x in row_sums(values, sel_BT)), **boot)
    if shadow_after_BT is None:
        shadow_after_BT = np.full(np.shape(dlogp_BT), np.nan)
    return GroupShift(
        name,
        int(row_sums(dlogp_BT, sel_BT)[1].sum()),
        mean(dlogp_BT),
        mean(dlogp_BT - logr_BT),
        mean(shadow_after_BT),
    )


def group_shifts(
    dlogp_BT: np.ndarray,
    ratio_BT: np.ndarray,
    advantages_BT: np.ndarray,
    mask_BT: np.ndarray,
    lower: float,
    n_boot: int = N_BOOT,
    seed: int = 0,
    shadow_after_BT: np.ndarray | None = None,
) -> list[GroupShift]:
    """`group_shift` of each group of `token_groups`, in `GROUPS` order."""
    groups = token_groups(ratio_BT, advantages_BT, mask_BT, lower)
    logr = step_log_ratio(ratio_BT)
    return [
        group_shift(g, dlogp_BT, logr, groups[g], n_boot, seed, shadow_after_BT) for g in GROUPS
    ]


def shadow_after(
    logp_ref_t_BT: np.ndarray, old_logp_ref_BT: np.ndarray, ratio_ref_BT: np.ndarray
) -> np.ndarray:
    """The BF16 shadow's log-prob change after step s: logp_ref_t - (old_ref + log r_ref)."""
    old = np.asarray(old_logp_ref_BT, np.float64)
    return np.asarray(logp_ref_t_BT, np.float64) - old - step_log_ratio(ratio_ref_BT)
