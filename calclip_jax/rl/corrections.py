"""Rollout-trainer mismatch corrections: truncated / masked IS and geometric rejection.

Definitions follow verl's rollout correction (truncated IS weights, "mask"-mode rejection).
Per valid token log rho_t = old_logp_trainer - rollout_logp; every exponent is clamped to
+-LOG_RATIO_CLAMP (20, verl's safety bound) first. S = sum_t log rho_t, Gm = S / n_valid (both
over valid tokens).

  mode        weight on kept tokens           kept (valid and ...)         verl equivalent
  none        1                               all                          off
  token_tis   min(e^log rho_t, tis_cap)       all                          rollout_is="token"
  seq_tis     min(e^S, tis_cap)               all                          rollout_is="sequence"
  token_mis   rho_t = e^log rho_t             mis_low <= rho_t <= mis_high  IS "token" + RS "token"
  seq_mis     e^S                             mis_low <= e^S <= mis_high    Seq-MIS: IS "sequence"
                                                                            + RS "sequence"
  geo_reject  1 (pure rejection, no IS)       1-d <= e^Gm <= 1+d            Geo-RS: RS "geometric"

MIS is verl's "mask" mode: kept tokens keep their (untruncated) ratio and rejected
tokens leave the response mask, hence the loss denominator, rather than being weighted 0. The
MIS weights equal verl's IS+RS presets whenever its IS threshold is >= mis_high (then its
truncation never binds on kept tokens). token_mis is IcePop's M(k) = k on [alpha, beta]; IcePop's
paper writes the loss over all |y_i| tokens, we follow verl and drop the rejected ones. Geo-RS:
verl uses no IS weight (`rollout_is=None`); its lower threshold is configurable, ours is 1 - d.

Weights are stop-gradient float32 [B, T], 0 outside `keep`. Pass `keep` as the loss mask.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from jax import lax

from calclip_jax.knob_rules import above, at_least, one_of
from calclip_jax.rl.losses import clamped_exp

MODES = ("none", "token_tis", "seq_tis", "token_mis", "seq_mis", "geo_reject")


@dataclasses.dataclass(frozen=True)
class CorrectionConfig:
    mode: str = "token_tis"  # one of MODES
    tis_cap: float = 2.0  # C of token/sequence TIS; also the threshold of tis_trunc_frac
    mis_low: float = 0.5  # MIS lower bound (IcePop alpha)
    mis_high: float = 5.0  # MIS upper bound (IcePop beta)
    geo_delta: float = 0.01  # geometric rejection half-width d

    def __post_init__(self) -> None:
        one_of(self, "mode", MODES)
        above(self, 0, "tis_cap", "mis_low", "mis_high")
        if self.mis_high < self.mis_low:
            raise ValueError(f"mis_high must be >= mis_low = {self.mis_low}, got {self.mis_high}")
        at_least(self, 0, "geo_delta")

    @classmethod
    def from_dict(cls, d: dict) -> CorrectionConfig:
        return cls(**d)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _inside(x: jax.Array, low: float, high: float) -> jax.Array:
    return (x >= low) & (x <= high)


def mismatch_weights(
    old_logp_BT: jax.Array,
    rollout_logp_BT: jax.Array,
    mask_BT: jax.Array,
    config: CorrectionConfig,
) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
    """(weights_BT, keep_BT, aux) for `config.mode`; see the module docstring.

    keep_BT: bool [B, T], the valid tokens the loss keeps (== mask for none / *_tis).
    aux (over valid tokens): tis_trunc_frac (share with rho_t > tis_cap, whatever the mode),
    is_reject_frac (share dropped), is_zero_frac (share with weight 0: the dropped ones, as kept
    weights are >= e^-20), is_weight_mean (mean weight over kept tokens).
    """
    valid_BT = mask_BT.astype(bool)
    log_rho_BT = jnp.where(valid_BT, old_logp_BT - rollout_logp_BT, 0.0).astype(jnp.float32)
    log_rho_BT = lax.stop_gradient(log_rho_BT)
    rho_BT = clamped_exp(log_rho_BT)
    seq_log_B1 = jnp.sum(log_rho_BT, axis=-1, keepdims=True)
    shape = rho_BT.shape
    accept_BT = jnp.ones(shape, bool)
    mode = config.mode
    if mode == "none":
        w_BT = jnp.ones(shape, jnp.float32)
    elif mode == "token_tis":
        w_BT = jnp.minimum(rho_BT, config.tis_cap)
    elif mode == "seq_tis":
        w_BT = jnp.broadcast_to(jnp.minimum(clamped_exp(seq_log_B1), config.tis_cap), shape)
    elif mode == "token_mis":
        w_BT = rho_BT
        accept_BT = _inside(rho_BT, config.mis_low, config.mis_high)
    elif mode == "seq_mis":
        seq_rho_B1 = clamped_exp(seq_log_B1)
        w_BT = jnp.broadcast_to(seq_rho_B1, shape)
        accept_BT = jnp.broadcast_to(_inside(seq_rho_B1, config.mis_low, config.mis_high), shape)
    else:  # geo_reject
        n_B1 = jnp.maximum(jnp.sum(valid_BT, axis=-1, keepdims=True), 1)
        geo_B1 = clamped_exp(seq_log_B1 / n_B1)
        low = 1.0 - config.geo_delta if config.geo_delta < 1.0 else -math.inf
        w_BT = jnp.ones(shape, jnp.float32)
        accept_BT = jnp.broadcast_to(_inside(geo_B1, low, 1.0 + config.geo_delta), shape)
    keep_BT = valid_BT & accept_BT
    w_BT = lax.stop_gradient(jnp.where(keep_BT, w_BT, 0.0))
    n_valid = jnp.maximum(jnp.sum(valid_BT), 1).astype(jnp.float32)
    n_keep = jnp.maximum(jnp.sum(keep_BT), 1).astype(jnp.float32)
    aux = {
        "tis_trunc_frac": jnp.sum(valid_BT & (rho_BT > config.tis_cap)) / n_valid,
        "is_reject_frac": jnp.sum(valid_BT & ~keep_BT) / n_valid,
        "is_zero_frac": jnp.sum(valid_BT & (w_BT == 0.0)) / n_valid,
        "is_weight_mean": jnp.sum(w_BT) / n_keep,
    }
    return w_BT, keep_BT, aux
