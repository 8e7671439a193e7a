"""PPO-clip policy loss (GRPO/DAPO), dual-clip, importance weights, KL to a reference policy.

Per valid token t (mask_BT = 1), r_t = exp(clip(logp - old_logp, -20, 20)) (`clamped_ratio`, the
+-LOG_RATIO_CLAMP bound of verl / Tunix: a runaway log-ratio gives a finite loss and gradient):
  pg_t = max(-A r_t, -A clip(r_t, lower, upper)); dual-clip (A < 0, c > 1): pg_t = min(pg_t, -c A);
  pg_t *= stop_grad(is_weights_t); loss = agg(pg) + kl_beta * agg(kl_t).
lower = 1 - eps_low, upper = 1 + eps_high (or `bounds=(lower, upper)`); all may be traced.
Aggregations (`agg`):
  token-mean            sum_{i,t} x / sum_{i,t} mask                  (DAPO)
  seq-mean-token-mean   mean_i [sum_t x / sum_t mask]                 (GRPO)
  seq-mean-token-sum    mean_i [sum_t x]                              (Dr. GRPO-style)
The sequence means run over sequences with at least one valid token.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum")
KL_ESTIMATORS = ("k1", "k2", "k3")
LOG_RATIO_CLAMP = 20.0  # |log-ratio| bound before any exp (verl's SAFETY_BOUND)


def clamp_log_ratio(log_ratio: jax.Array) -> jax.Array:
    """log_ratio clipped to [-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP]: safe to exponentiate."""
    return jnp.clip(log_ratio, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)


def clamped_exp(log_ratio: jax.Array) -> jax.Array:
    """exp(clamp_log_ratio(log_ratio)): finite for any finite log-ratio."""
    return jnp.exp(clamp_log_ratio(log_ratio))


def clamped_ratio(logp: jax.Array, base: jax.Array, mask: jax.Array) -> jax.Array:
    """clamped_exp(logp - base) where mask, 1 elsewhere (the gradient is 0 where the clamp binds
    and at masked positions; never NaN from garbage there)."""
    return clamped_exp(jnp.where(mask.astype(bool), logp - base, 0.0))


def check_dual_clip(c: float | None) -> float | None:
    """Dual-clip constant: None or 0 mean off (None returned); otherwise it must exceed 1 (c <= 1
    would cap every A < 0 token at a loss below the unclipped one and zero its gradient)."""
    if c is None:
        return None
    try:
        value = float(c)
    except jax.errors.ConcretizationTypeError:  # traced: cannot be checked here
        return c
    if value == 0.0:
        return None
    if not 1.0 < value < math.inf:
        raise ValueError(f"dual_clip_c must be a finite number > 1, or 0 / None for off; got {c}")
    return value


def aggregate(x_BT: jax.Array, mask_BT: jax.Array, agg: str) -> jax.Array:
    """Reduce per-token values to a scalar with one of `AGGREGATIONS` (masked)."""
    mask_BT = mask_BT.astype(jnp.float32)
    x_BT = jnp.where(mask_BT > 0, x_BT, 0.0)
    if agg == "token-mean":
        return jnp.sum(x_BT * mask_BT) / jnp.maximum(jnp.sum(mask_BT), 1.0)
    tokens_B = jnp.sum(mask_BT, axis=-1)
    seq_sum_B = jnp.sum(x_BT * mask_BT, axis=-1)
    if agg == "seq-mean-token-mean":
        per_seq_B = seq_sum_B / jnp.maximum(tokens_B, 1.0)
    elif agg == "seq-mean-token-sum":
        per_seq_B = seq_sum_B
    else:
        raise ValueError(f"agg must be one of {AGGREGATIONS}, got {agg!r}")
    n_seq = jnp.sum(tokens_B > 0)
    return jnp.sum(per_seq_B) / jnp.maximum(n_seq, 1).astype(jnp.float32)


def kl_penalty(logp_BT: jax.Array, ref_logp_BT: jax.Array, estimator: str = "k3") -> jax.Array:
    """Per-token KL(pi || pi_ref) estimate on sampled tokens: k1 = logp - ref,
    k2 = (logp - ref)^2 / 2, k3 = exp(x) - x - 1 with x = clip(ref - logp, +-LOG_RATIO_CLAMP)."""
    log_ratio_BT = ref_logp_BT - logp_BT
    if estimator == "k1":
        return -log_ratio_BT
    if estimator == "k2":
        return 0.5 * log_ratio_BT**2
    if estimator == "k3":
        x_BT = clamp_log_ratio(log_ratio_BT)
        return jnp.expm1(x_BT) - x_BT
    raise ValueError(f"kl_estimator must be one of {KL_ESTIMATORS}, got {estimator!r}")


def broadcast_advantages(advantages: jax.Array, shape_BT: tuple[int, ...]) -> jax.Array:
    """Advantages to the mask's shape, float32: already that shape (per token, e.g. flat [N] with
    mask [N] or [B, T]) -> unchanged; [B] (per sequence) with a [B, T] mask -> broadcast over T."""
    adv = jnp.asarray(advantages, jnp.float32)
    shape_BT = tuple(shape_BT)
    if adv.shape != shape_BT and adv.ndim == 1 and len(shape_BT) == 2:
        adv = adv[:, None]
    return jnp.broadcast_to(adv, shape_BT)


def ppo_policy_loss(
    logp: jax.Array,
    old_logp: jax.Array,
    advantages: jax.Array,
    mask: jax.Array,
    *,
    eps_low: jax.Array | float,
    eps_high: jax.Array | float,
    dual_clip_c: float | None = None,
    is_weights: jax.Array | None = None,
    agg: str = "token-mean",
    ref_logp: jax.Array | None = None,
    kl_beta: jax.Array | float = 0.0,
    kl_estimator: str = "k3",
    bounds: tuple[jax.Array, jax.Array] | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Clipped policy loss on [B, T] arrays; returns (loss, aux).

    aux: pg_loss, clip_frac (valid tokens whose clipped branch is active), and kl_loss
    (aggregated KL term, before kl_beta) when `ref_logp` is given.
    Masked positions never produce NaN. `dual_clip_c`: None / 0 = off, else > 1 (ValueError).
    """
    if agg not in AGGREGATIONS:
        raise ValueError(f"agg must be one of {AGGREGATIONS}, got {agg!r}")
    dual_clip_c = check_dual_clip(dual_clip_c)
    valid_BT = mask.astype(bool)
    lower, upper = (1.0 - eps_low, 1.0 + eps_high) if bounds is None else bounds
    adv_BT = broadcast_advantages(advantages, logp.shape)
    ratio_BT = clamped_ratio(logp, old_logp, valid_BT)
    pg_unclipped_BT = -adv_BT * ratio_BT
    pg_clipped_BT = -adv_BT * jnp.clip(ratio_BT, lower, upper)
    pg_BT = jnp.maximum(pg_unclipped_BT, pg_clipped_BT)
    clipped_BT = pg_clipped_BT > pg_unclipped_BT
    if dual_clip_c is not None:
        pg_dual_BT = jnp.minimum(pg_BT, -dual_clip_c * adv_BT)
        clipped_BT = jnp.where(adv_BT < 0, clipped_BT | (pg_dual_BT < pg_BT), clipped_BT)
        pg_BT = jnp.where(adv_BT < 0, pg_dual_BT, pg_BT)
    if is_weights is not None:
        pg_BT = pg_BT * lax.stop_gradient(is_weights)
    pg_loss = aggregate(pg_BT, valid_BT, agg)
    n_valid = jnp.maximum(jnp.sum(valid_BT), 1).astype(jnp.float32)
    aux = {
        "pg_loss": pg_loss,
        "clip_frac": jnp.sum(clipped_BT & valid_BT) / n_valid,
    }
    loss = pg_loss
    if ref_logp is not None:
        kl_BT = kl_penalty(logp, jnp.where(valid_BT, ref_logp, logp), kl_estimator)
        kl_loss = aggregate(kl_BT, valid_BT, agg)
        aux["kl_loss"] = kl_loss
        loss = loss + kl_beta * kl_loss
    return loss, aux
