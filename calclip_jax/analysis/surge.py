"""Entropy surge detection, the one definition shared by train summary, sweep and notebooks.

Running minimum ``m_t = min(entropy_1..t)`` (the current step included); a surge happens at step t
when ``entropy_t > k * m_t`` and t is past the warmup (1-based step ``t > warmup``). The running
minimum also covers the warmup steps; only the flagging waits. Missing values (NaN/None) neither
update the minimum nor flag a surge.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

SURGE_FACTOR = 1.5  # k: entropy above k x its running minimum (config: log.surge_factor)
SURGE_WARMUP = 5  # steps that can never be flagged (config: log.surge_warmup)


def _as_float(values: Sequence[float | None] | np.ndarray) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


def running_min(entropy: Sequence[float | None] | np.ndarray) -> np.ndarray:
    """Running minimum over steps, NaN-skipping (NaN until the first finite value)."""
    x = _as_float(entropy)
    filled = np.where(np.isnan(x), np.inf, x)
    m = np.minimum.accumulate(filled) if x.size else filled
    return np.where(np.isinf(m), np.nan, m)


def surge_mask(
    entropy: Sequence[float | None] | np.ndarray,
    steps: Sequence[int] | np.ndarray | None = None,
    *,
    k: float = SURGE_FACTOR,
    warmup: int = SURGE_WARMUP,
) -> np.ndarray:
    """Boolean mask of steps where entropy exceeds k x its running minimum (past the warmup).

    steps: 1-based step numbers aligned with `entropy`; default 1..n.
    """
    x = _as_float(entropy)
    t = np.arange(1, x.size + 1) if steps is None else np.asarray(steps)
    if t.shape != x.shape:
        raise ValueError(f"steps has shape {t.shape}, entropy has shape {x.shape}")
    m = running_min(x)
    with np.errstate(invalid="ignore"):
        return (x > k * m) & (t > warmup)


def detect_surge(
    entropy: Sequence[float | None] | np.ndarray,
    steps: Sequence[int] | np.ndarray | None = None,
    *,
    k: float = SURGE_FACTOR,
    warmup: int = SURGE_WARMUP,
) -> int | None:
    """First step with an entropy surge, or None (see the module docstring)."""
    mask = surge_mask(entropy, steps, k=k, warmup=warmup)
    if not mask.any():
        return None
    idx = int(np.argmax(mask))
    return idx + 1 if steps is None else int(np.asarray(steps)[idx])
