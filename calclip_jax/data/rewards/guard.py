"""Calling a reward function so that it cannot poison an update: a batch call that raises or
returns the wrong number of scores is retried row by row; a row whose call raises, or whose score
is not a finite number, scores 0 and is counted and reported (logged with the response)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

import numpy as np

from calclip_jax.data.rewards.builtin import RewardFn

LOG = logging.getLogger("calclip_jax.rewards")
SHOWN_CHARS = 200  # of an offending response, in the warning


@dataclasses.dataclass(frozen=True)
class RewardBatch:
    """What a reward function is called on: decoded responses and their rows' references."""

    prompts: Sequence[str]
    responses: Sequence[str]
    answers: Sequence[str]
    finished: Sequence[bool]

    def __len__(self) -> int:
        return len(self.responses)

    def row(self, i: int) -> RewardBatch:
        return RewardBatch(
            [self.prompts[i]], [self.responses[i]], [self.answers[i]], [self.finished[i]]
        )


def _call(fn: RewardFn, batch: RewardBatch) -> np.ndarray:
    """fn's scores as float32 [len(batch)] (non-finite kept); raises if it fails or misfits."""
    out = fn(
        list(batch.responses),
        list(batch.answers),
        prompts=list(batch.prompts),
        finished=[bool(f) for f in batch.finished],
    )
    with np.errstate(over="ignore"):  # a score beyond float32 becomes inf: reported below
        scores = np.asarray(out, np.float64).astype(np.float32).reshape(-1)
    if scores.shape != (len(batch),):
        raise ValueError(f"returned {np.shape(out)} scores for {len(batch)} responses")
    return scores


def _report(label: str, what: str, response: str, count: int) -> None:
    shown = response if len(response) <= SHOWN_CHARS else response[:SHOWN_CHARS] + "..."
    LOG.warning(
        "reward %r %s on %d response(s), scored 0; e.g. on response %r", label, what, count, shown
    )


def guarded_scores(label: str, fn: RewardFn, batch: RewardBatch) -> tuple[np.ndarray, np.ndarray]:
    """(scores float32 [B], failed bool [B]): fn's scores, 0 where it failed on the row."""
    try:
        scores = _call(fn, batch)
        raised = np.zeros(len(batch), bool)
    except Exception:  # a user's function may raise anything: retry row by row
        scores = np.zeros(len(batch), np.float32)
        raised = np.zeros(len(batch), bool)
        errors: list[Exception] = []
        for i in range(len(batch)):
            try:
                scores[i] = _call(fn, batch.row(i))[0]
            except Exception as err:
                raised[i] = True
                errors.append(err)
        if raised.any():
            err, response = errors[0], batch.responses[int(np.argmax(raised))]
            _report(label, f"raised {type(err).__name__}: {err}", response, len(errors))
    bad = ~np.isfinite(scores) & ~raised
    if bad.any():
        first = int(np.argmax(bad))
        _report(label, f"returned {scores[first]}", batch.responses[first], int(bad.sum()))
    failed = raised | bad
    return np.where(failed, np.float32(0.0), scores), failed
