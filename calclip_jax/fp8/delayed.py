"""Per-tensor delayed scaling: an explicit amax history (newest first) and the scale it implies.

The scale used at step t comes only from the history *before* t; the amax observed at t is then
pushed into the history (``update_history``). The trainer may scale a whole rollout batch from
the history as the batch began and push what its updates observed into another copy
(``newest_amaxes``, ``push_amaxes``; `train.delayed_scales="batch"`). An empty history (all
zeros, e.g. the first step) falls back to ``fallback_amax`` (the current amax) if given, else to
scale 1. Scales come from ``quantize.compute_scale``: finite for any finite amax and margin
(clamped to the float32 max, not inf), NaN for a non-finite fallback amax.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp

from calclip_jax.fp8.quantize import compute_scale
from calclip_jax.fp8.vocabulary import AMAX_REDUCES

GRAD_HISTORY_NAME = "grad_amax_history"


def init_history(length: int) -> jnp.ndarray:
    """An empty (all-zero) float32 amax history of ``length`` steps."""
    if length < 1:
        raise ValueError(f"amax history length must be >= 1, got {length}")
    return jnp.zeros((length,), jnp.float32)


def update_history(history: jnp.ndarray, amax: jnp.ndarray) -> jnp.ndarray:
    """Push ``amax`` at index 0 and drop the oldest entry. Non-finite amaxes are recorded as 0."""
    amax = jnp.asarray(amax, jnp.float32)
    amax = jnp.where(jnp.isfinite(amax), amax, 0.0)
    return jnp.roll(history, 1).at[0].set(amax)


def amax_from_history(history: jnp.ndarray, reduce: str = "max") -> jnp.ndarray:
    """Max over the history, or its most recent entry."""
    if reduce not in AMAX_REDUCES:
        raise ValueError(f"amax_reduce={reduce!r} is not allowed; choose one of {AMAX_REDUCES}")
    return jnp.max(history) if reduce == "max" else history[0]


def scale_from_history(
    history: jnp.ndarray,
    fmt: Any,
    *,
    reduce: str = "max",
    margin: float = 0.0,
    pow2_scale: bool = False,
    fallback_amax: jnp.ndarray | None = None,
) -> jnp.ndarray:
    """Float32 scalar scale ``amax_hist * 2**margin / fmt_max`` from a history of past amaxes."""
    amax = amax_from_history(history, reduce)
    if fallback_amax is not None:
        amax = jnp.where(amax > 0, amax, jnp.asarray(fallback_amax, jnp.float32))
    return compute_scale(amax, fmt, margin=margin, pow2_scale=pow2_scale)


def merge_fp8_meta(updated_meta: Mapping, meta_grads: Mapping) -> Any:
    """New "fp8_meta" state after an update (overwrite-with-gradient for gradient histories).

    ``updated_meta``: the collection returned by ``apply(..., mutable=["fp8_meta"])`` (forward
    histories updated). ``meta_grads``: the gradient of the loss w.r.t. the input "fp8_meta"
    collection, whose ``grad_amax_history`` leaves hold the *new* gradient histories (the backward
    pass writes them there instead of a true gradient). Other leaves come from ``updated_meta``.
    """

    def pick(path: tuple, new: jnp.ndarray, grad: jnp.ndarray) -> jnp.ndarray:
        name = getattr(path[-1], "key", None)
        return grad if name == GRAD_HISTORY_NAME else new

    return jax.tree_util.tree_map_with_path(pick, dict(updated_meta), dict(meta_grads))


def newest_amaxes(histories: Any) -> Any:
    """Each history's newest entry: what the forward (and backward) that pushed it observed."""
    return jax.tree.map(lambda h: h[0], histories)


def push_amaxes(histories: Any, amaxes: Any) -> Any:
    """``update_history`` of every history with the matching amax of ``amaxes``."""
    return jax.tree.map(update_history, histories, amaxes)
