"""Rollout-trainer mismatch corrections: TIS, MIS (IcePop masking), geometric rejection.

rho_t = exp(old_logp_trainer - rollout_logp) per valid token. Modes (`CorrectionConfig.mode`):
  none        weight 1
  token_tis   min(rho_t, tis_cap)
  seq_tis     min(prod_t rho_t, tis_cap), broadcast over the sequence
  token_mis   1 if mis_low <= rho_t <= mis_high else 0
  seq_mis     1 if mis_low <= prod_t rho_t <= mis_high else 0 (whole sequence)
  geo_reject  1 if 1 - geo_delta <= (prod_t rho_t)^(1/T) <= 1 + geo_delta else 0 (whole sequence)
Weights are stop-gradient, float32 [B, T], 0 on masked positions. Products are formed in log
space (no overflow). Sequences without valid tokens have prod = 1.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from jax import lax

MODES = ("none", "token_tis", "seq_tis", "token_mis", "seq_mis", "geo_reject")


@dataclasses.dataclass(frozen=True)
class CorrectionConfig:
    mode: str = "none"  # one of MODES
    tis_cap: float = 2.0  # C of token/sequence TIS; also the threshold of tis_trunc_frac
    mis_low: float = 0.5  # IcePop lower bound alpha
    mis_high: float = 5.0  # IcePop upper bound beta
    geo_delta: float = 0.01  # geometric rejection half-width d

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"CorrectionConfig.mode must be one of {MODES}, got {self.mode!r}")
        if not 0.0 < self.mis_low <= self.mis_high:
            raise ValueError(f"need 0 < mis_low <= mis_high, got {self.mis_low}, {self.mis_high}")
        if self.tis_cap <= 0.0 or self.geo_delta < 0.0:
            raise ValueError("tis_cap must be > 0 and geo_delta >= 0")

    @classmethod
    def from_dict(cls, d: dict) -> CorrectionConfig:
        return cls(**d)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def mismatch_weights(
    old_logp_BT: jax.Array,
    rollout_logp_BT: jax.Array,
    mask_BT: jax.Array,
    config: CorrectionConfig,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Importance weights [B, T] for `config.mode` and metrics.

    aux: tis_trunc_frac (share of valid tokens with rho > tis_cap, whatever the mode),
    is_zero_frac (share of valid tokens given weight 0), is_weight_mean (over valid tokens).
    """
    valid_BT = mask_BT.astype(bool)
    log_rho_BT = jnp.where(valid_BT, old_logp_BT - rollout_logp_BT, 0.0).astype(jnp.float32)
    log_rho_BT = lax.stop_gradient(log_rho_BT)
    rho_BT = jnp.exp(log_rho_BT)
    seq_log_rho_B1 = jnp.sum(log_rho_BT, axis=-1, keepdims=True)
    mode = config.mode
    if mode == "none":
        w_BT = jnp.ones_like(rho_BT)
    elif mode == "token_tis":
        w_BT = jnp.minimum(rho_BT, config.tis_cap)
    elif mode == "seq_tis":
        w_B1 = jnp.exp(jnp.minimum(seq_log_rho_B1, jnp.log(config.tis_cap)))
        w_BT = jnp.broadcast_to(w_B1, rho_BT.shape)
    elif mode == "token_mis":
        w_BT = ((rho_BT >= config.mis_low) & (rho_BT <= config.mis_high)).astype(jnp.float32)
    elif mode == "seq_mis":
        inside_B1 = (seq_log_rho_B1 >= jnp.log(config.mis_low)) & (
            seq_log_rho_B1 <= jnp.log(config.mis_high)
        )
        w_BT = jnp.broadcast_to(inside_B1, rho_BT.shape).astype(jnp.float32)
    else:  # geo_reject
        n_B1 = jnp.maximum(jnp.sum(valid_BT, axis=-1, keepdims=True), 1)
        geo_B1 = jnp.exp(seq_log_rho_B1 / n_B1)
        inside_B1 = jnp.abs(geo_B1 - 1.0) <= config.geo_delta
        w_BT = jnp.broadcast_to(inside_B1, rho_BT.shape).astype(jnp.float32)
    w_BT = jnp.where(valid_BT, w_BT, 0.0)
    n_valid = jnp.maximum(jnp.sum(valid_BT), 1).astype(jnp.float32)
    aux = {
        "tis_trunc_frac": jnp.sum(valid_BT & (rho_BT > config.tis_cap)) / n_valid,
        "is_zero_frac": jnp.sum(valid_BT & (w_BT == 0.0)) / n_valid,
        "is_weight_mean": jnp.sum(w_BT) / n_valid,
    }
    return lax.stop_gradient(w_BT), aux
