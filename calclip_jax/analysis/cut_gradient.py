"""What gradient a batch's cut (unfinished) responses get, against its finished ones: one dump.

A response cut at `rollout.max_new_tokens` is what the verifier calls garbled. GRPO pushes its
tokens down only where its advantage is negative and the clip lets the token through: a response
whose whole group scored alike has advantage 0 and gets no gradient whatever the clip bounds, and
an A < 0 token whose ratio fell below the lower bound has lost its gradient
(`analysis.clipped_trace.token_groups`'s rule). Counting both, for the cut responses and for the
finished ones, says how much of the garbling the clip bounds can act on, and whether the clip
falls on garbled tokens more than on the rest.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from calclip_jax.analysis.clipped_trace import CLIPPED, UNCLIPPED, token_groups


@dataclasses.dataclass(frozen=True)
class CutCounts:
    """One dump's counts; each pair is (cut responses, finished responses)."""

    rows: tuple[int, int]
    zero_rows: tuple[int, int]  # rows whose every response token has advantage 0
    neg_tokens: tuple[int, int]  # response tokens with A < 0
    clipped_tokens: tuple[int, int]  # of those, the ones below the lower clip bound


def cut_counts(
    finished_B: np.ndarray,
    ratio_BT: np.ndarray,
    advantages_BT: np.ndarray,
    mask_BT: np.ndarray,
    lower: float,
) -> CutCounts:
    """`CutCounts` of one dump: `finished_B` bool per row, advantages [B] or [B, T], the rest as
    `token_groups` reads them."""
    finished = np.asarray(finished_B, bool)
    mask = np.asarray(mask_BT, bool)
    if finished.shape != mask.shape[:1]:
        raise ValueError(f"one finished flag per row: {finished.shape} against {mask.shape}")
    adv = np.asarray(advantages_BT)
    adv = np.broadcast_to(adv[:, None] if adv.ndim == 1 else adv, mask.shape)
    zero = ~np.any(mask & (adv != 0), axis=1)
    groups = token_groups(ratio_BT, adv, mask, lower)
    neg = groups[CLIPPED] | groups[UNCLIPPED]

    def split(per_row: np.ndarray) -> tuple[int, int]:
        return int(per_row[~finished].sum()), int(per_row[finished].sum())

    return CutCounts(
        rows=(int((~finished).sum()), int(finished.sum())),
        zero_rows=split(zero),
        neg_tokens=split(neg.sum(axis=1)),
        clipped_tokens=split(groups[CLIPPED].sum(axis=1)),
    )
