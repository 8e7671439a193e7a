"""Entropy surge detection, the one definition shared by train summary, sweep and notebooks.

Entropy is first smoothed by a trailing mean over the last ``window`` steps (``s_t``; window 1 =
raw). Running minimum ``m_t = min(s_1..t)`` (the current step included); a surge happens at step
t when ``s_t > k * m_t`` and t is past the warmup (1-based step ``t > warmup``). The running
minimum also covers the warmup steps; only the flagging waits. Missing values (NaN/None) neither
update the minimum nor flag a surge, and are left out of the trailing mean.

Why smooth: a batch's entropy is noisy (128 sampled responses), so the running minimum of the
raw series is an outlier, and k times it is crossed by noise in long runs that never surge (a
300-step BF16 run fell to a one-step minimum of 0.175 and was flagged at a one-step 0.27).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

SURGE_FACTOR = 1.5  # k: entropy above k x its running minimum (config: log.surge_factor)
SURGE_WARMUP = 5  # steps that can never be flagged (config: log.surge_warmup)
SURGE_WINDOW = 10  # trailing-mean window before the comparison (config: log.surge_window)


def _as_float(values: Sequence[float | None] | np.ndarray) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


def trailing_mean(values: Sequence[float | None] | np.ndarray, window: int) -> np.ndarray:
    """Mean of the finite values among the last `window` entries (NaN where there are none)."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    x = _as_float(values)
    if x.size == 0:
        return x
    padded = np.concatenate([np.full(window - 1, np.nan), x])
    windows = np.lib.stride_tricks.sliding_window_view(padded, window)  # [n, window]
    finite = np.isfinite(windows)
    count = finite.sum(axis=1)
    total = np.where(finite, windows, 0.0).sum(axis=1)  # exact for window 1 (no cumsum drift)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _smoothed(
    entropy: Sequence[float | None] | np.ndarray,
    steps: Sequence[int] | np.ndarray | None,
    window: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(trailing mean s_t, NaN where entropy is missing; 1-based step numbers t)."""
    raw = _as_float(entropy)
    t = np.arange(1, raw.size + 1) if steps is None else np.asarray(steps)
    if t.shape != raw.shape:
        raise ValueError(f"steps has shape {t.shape}, entropy has shape {raw.shape}")
    return np.where(np.isfinite(raw), trailing_mean(raw, window), np.nan), t


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
    window: int = SURGE_WINDOW,
) -> np.ndarray:
    """Boolean mask of steps where smoothed entropy exceeds k x its running minimum (past the
    warmup; see the module docstring). steps: 1-based step numbers aligned with `entropy`;
    default 1..n."""
    x, t = _smoothed(entropy, steps, window)
    m = running_min(x)
    with np.errstate(invalid="ignore"):
        return (x > k * m) & (t > warmup)


def detect_surge(
    entropy: Sequence[float | None] | np.ndarray,
    steps: Sequence[int] | np.ndarray | None = None,
    *,
    k: float = SURGE_FACTOR,
    warmup: int = SURGE_WARMUP,
    window: int = SURGE_WINDOW,
) -> int | None:
    """First step with an entropy surge, or None (see the module docstring)."""
    mask = surge_mask(entropy, steps, k=k, warmup=warmup, window=window)
    if not mask.any():
        return None
    idx = int(np.argmax(mask))
    return idx + 1 if steps is None else int(np.asarray(steps)[idx])


def max_rebound(
    entropy: Sequence[float | None] | np.ndarray,
    steps: Sequence[int] | np.ndarray | None = None,
    *,
    warmup: int = SURGE_WARMUP,
    window: int = SURGE_WINDOW,
) -> float:
    """Largest ``s_t / m_t`` past the warmup: how close a run came to a surge (a surge is a
    rebound above k). 1.0 for entropy that only falls; NaN when nothing is past the warmup."""
    s, t = _smoothed(entropy, steps, window)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = s / running_min(s)
    r = r[(t > warmup) & np.isfinite(r)]
    return float(r.max()) if r.size else float("nan")
