"""Diagnostics of one policy-loss evaluation, with the metric names used everywhere.

`rl_diagnostics` returns float32 scalars. Always present:
  clip_lower, clip_upper          bounds in use
  clip_frac_lower_neg             share of valid A<0 tokens with ratio < clip_lower
  clip_frac_upper_pos             share of valid A>0 tokens with ratio > clip_upper
  zero_grad_frac_neg / _pos       share of valid A<0 / A>0 tokens whose policy-gradient term is
                                  exactly zero: A<0: r < lower, or r > c under dual-clip; A>0:
                                  r > upper; either sign: importance weight == 0 (MIS, rejection)
  ratio_{neg,pos}_p{01,05,50,95,99}  ratio quantiles ("lower" rule) over valid A<0 / A>0 tokens
                                  (NaN when that sign has no token)
Present when their inputs are given:
  entropy                         passed in: scalar, or entropy_BT reduced by masked token mean
  clip_frac_lower_neg_ref, clip_frac_upper_pos_ref   the same under ratio_ref_BT (BF16 shadow)
                                  with `ref_bounds` (default: the bounds in use; the update step
                                  passes the static bounds, the ones the reference is judged by),
                                  on the same tokens (`calibration.shadow_every` in any arm)
  mismatch_k3 = mean(rho - 1 - log rho), rho = exp(old_logp - rollout_logp)
  mismatch_logp_abs = mean |old_logp - rollout_logp|
  token_mult_prob_error = mean exp(|rollout_logp - old_logp|)
  max_prob_diff = max |exp(old_logp) - exp(rollout_logp)|
  kl_ref = mean k3(pi || pi_ref) = mean exp(ref - logp) - (ref - logp) - 1
The correction's own metrics (tis_trunc_frac, is_*) come with its weights (rl/corrections.py).
All means are over valid (mask = 1) tokens; empty sets give 0 for fractions and means.
Every log-ratio is clamped to +-LOG_RATIO_CLAMP (20) before exp, as in the loss.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from calclip_jax.rl.losses import (
    broadcast_advantages,
    check_dual_clip,
    clamp_log_ratio,
    clamped_ratio,
    kl_penalty,
)
from calclip_jax.rl.quantile import masked_quantile

QUANTILES = (("p01", 0.01), ("p05", 0.05), ("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
# the metric names, by when `rl_diagnostics` reports them (the module docstring's groups)
CLIP_METRICS = (  # always, and always finite
    "clip_lower",
    "clip_upper",
    "clip_frac_lower_neg",
    "clip_frac_upper_pos",
    "zero_grad_frac_neg",
    "zero_grad_frac_pos",
)
RATIO_QUANTILE_METRICS = tuple(  # always; NaN when that advantage sign has no token
    f"ratio_{sign}_{name}" for sign in ("neg", "pos") for name, _ in QUANTILES
)
SHADOW_METRICS = ("clip_frac_lower_neg_ref", "clip_frac_upper_pos_ref")  # with ratio_ref_BT
MISMATCH_METRICS = (  # with rollout_logp_BT
    "mismatch_k3",
    "mismatch_logp_abs",
    "token_mult_prob_error",
    "max_prob_diff",
)


def _frac(hit_BT: jax.Array, sel_BT: jax.Array) -> jax.Array:
    return jnp.sum(hit_BT & sel_BT) / jnp.maximum(jnp.sum(sel_BT), 1).astype(jnp.float32)


def _mean(x_BT: jax.Array, valid_BT: jax.Array) -> jax.Array:
    total = jnp.sum(jnp.where(valid_BT, x_BT, 0.0))
    return total / jnp.maximum(jnp.sum(valid_BT), 1).astype(jnp.float32)


def rl_diagnostics(
    logp_BT: jax.Array,
    old_logp_BT: jax.Array,
    advantages: jax.Array,
    mask_BT: jax.Array,
    bounds: tuple[jax.Array, jax.Array],
    *,
    rollout_logp_BT: jax.Array | None = None,
    entropy: jax.Array | None = None,
    ratio_ref_BT: jax.Array | None = None,
    ref_bounds: tuple[jax.Array, jax.Array] | None = None,
    ref_logp_BT: jax.Array | None = None,
    dual_clip_c: float | None = None,
    is_weights_BT: jax.Array | None = None,
    quantile_method: str = "auto",
) -> dict[str, jax.Array]:
    """Metrics of one policy-loss evaluation (stop-gradient); see the module docstring."""
    logp_BT, old_logp_BT = lax.stop_gradient(logp_BT), lax.stop_gradient(old_logp_BT)
    valid_BT = mask_BT.astype(bool)
    adv_BT = broadcast_advantages(advantages, logp_BT.shape)
    neg_BT, pos_BT = valid_BT & (adv_BT < 0), valid_BT & (adv_BT > 0)
    ratio_BT = clamped_ratio(logp_BT, old_logp_BT, valid_BT)
    lower, upper = (jnp.asarray(b, jnp.float32) for b in bounds)
    out: dict[str, jax.Array] = {"clip_lower": lower, "clip_upper": upper}
    if entropy is not None:
        entropy = jnp.asarray(entropy, jnp.float32)
        out["entropy"] = entropy if entropy.ndim == 0 else _mean(entropy, valid_BT)
    out["clip_frac_lower_neg"] = _frac(ratio_BT < lower, neg_BT)
    out["clip_frac_upper_pos"] = _frac(ratio_BT > upper, pos_BT)
    if ratio_ref_BT is not None:
        ref_lower, ref_upper = bounds if ref_bounds is None else ref_bounds
        out["clip_frac_lower_neg_ref"] = _frac(ratio_ref_BT < ref_lower, neg_BT)
        out["clip_frac_upper_pos_ref"] = _frac(ratio_ref_BT > ref_upper, pos_BT)
    dead_neg_BT = ratio_BT < lower
    dual_clip_c = check_dual_clip(dual_clip_c)
    if dual_clip_c is not None:
        dead_neg_BT = dead_neg_BT | (ratio_BT > dual_clip_c)
    dead_pos_BT = ratio_BT > upper
    if is_weights_BT is not None:
        zero_w_BT = is_weights_BT == 0
        dead_neg_BT, dead_pos_BT = dead_neg_BT | zero_w_BT, dead_pos_BT | zero_w_BT
    out["zero_grad_frac_neg"] = _frac(dead_neg_BT, neg_BT)
    out["zero_grad_frac_pos"] = _frac(dead_pos_BT, pos_BT)
    qs = jnp.array([q for _, q in QUANTILES], jnp.float32)
    for sign, sel_BT in (("neg", neg_BT), ("pos", pos_BT)):
        values = masked_quantile(ratio_BT, sel_BT, qs, method=quantile_method)
        for i, (name, _) in enumerate(QUANTILES):
            out[f"ratio_{sign}_{name}"] = values[i]
    if rollout_logp_BT is not None:
        diff_BT = jnp.where(valid_BT, old_logp_BT - rollout_logp_BT, 0.0)
        safe_BT = clamp_log_ratio(diff_BT)
        out["mismatch_k3"] = _mean(jnp.expm1(safe_BT) - safe_BT, valid_BT)
        out["mismatch_logp_abs"] = _mean(jnp.abs(diff_BT), valid_BT)
        out["token_mult_prob_error"] = _mean(jnp.exp(jnp.abs(safe_BT)), valid_BT)
        prob_diff_BT = jnp.abs(jnp.exp(old_logp_BT) - jnp.exp(rollout_logp_BT))
        out["max_prob_diff"] = jnp.max(jnp.where(valid_BT, prob_diff_BT, 0.0))
    if ref_logp_BT is not None:
        ref_BT = jnp.where(valid_BT, lax.stop_gradient(ref_logp_BT), logp_BT)
        out["kl_ref"] = _mean(kl_penalty(logp_BT, ref_BT, "k3"), valid_BT)
    return out
