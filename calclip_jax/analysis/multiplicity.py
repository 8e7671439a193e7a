"""P-values of a family of tests, adjusted for their number (Holm's step-down method).

With m tests at level alpha, a raw p <= alpha turns up by chance in about alpha * m of them.
Holm's adjusted p-values keep the chance of any false rejection in the family at or below alpha
(for any dependence between the tests) and never exceed Bonferroni's m * p.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def holm(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values, in the input's order. The i-th smallest of m finite p-values
    becomes max over j <= i of min(1, (m - j + 1) p_(j)); NaN (a test that could not be made)
    stays NaN and does not count in m."""
    p = np.asarray(p_values, np.float64)
    if p.ndim != 1:
        raise ValueError(f"one p-value per test, got shape {p.shape}")
    finite = np.isfinite(p)
    if np.any((p[finite] < 0) | (p[finite] > 1)):
        raise ValueError(f"p-values lie in [0, 1], got {p[finite & ((p < 0) | (p > 1))]}")
    out = np.full(p.shape, np.nan)
    idx = np.flatnonzero(finite)
    order = idx[np.argsort(p[idx], kind="stable")]
    m = order.size
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(scaled)
    return out
