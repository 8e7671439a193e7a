"""Calibrated Clipping: clip bounds for the (FP8) ratio matched to a reference (BF16) ratio.

Over valid tokens, with static bounds L0 = 1 - eps_low, U0 = 1 + eps_high:
- lower: q = share of A<0 tokens with ratio_ref < L0; `lower` makes the share of A<0 tokens with
  ratio < lower equal q exactly (k = q * n_neg tokens; ties in `ratio` can make it fall short by
  the tie size). Every L in (r_(k-1), r_(k)] (sorted A<0 ratios) does this; we return the point of
  that interval closest to L0, so ratio == ratio_ref gives exactly L0 (and q = 0 gives
  min(L0, min r), q = 1 gives max(L0, just above max r)).
- upper, by `upper_rule`:
  fixed     U0.
  scaled    1 + (1 - lower) * eps_high / eps_low.
  quantile  the share of A>0 tokens with ratio > U equals that of ratio_ref > U0 (closest to U0).
  balance   with G_neg(L) = sum_{A<0, r>=L} |A| r and G_pos(U) = sum_{A>0, r<=U} |A| r, choose U so
            that G_pos(U) / G_neg(lower) = G_pos_ref(U0) / G_neg_ref(L0). G_pos is a step function:
            we take the interval of U where G_pos first reaches the target (relative tolerance
            `balance_rtol`) and the point of it closest to U0. Solved by one sort or by a 32-step
            radix bisection (`solver`), both exact. If the reference or FP8 negative mass is 0 the
            target is undefined: U = U0. If the target exceeds the total positive mass: U = +inf,
            which the cap turns into `upper_max` (aux `calib_upper_capped` = 1).
- clamps: lower into [lower_min, lower_max] with lower_max = 1 and lower_min = max(0, 1 - 2 *
  eps_low) by default (`lower_floor`; unfloored, a small q with spread FP8 ratios follows the
  smallest A<0 ratios down: SmolLM2's committed runs carried 0.01, lower clipping effectively
  off), the floor reported (aux `calib_lower_floored` = 1); upper into [max(upper_min, lower),
  upper_max] with upper_min = 1 and upper_max = 1 + 2 * eps_high by default (an uncapped balance
  rule drifts to 2-2.7 at toy scale: upper clipping effectively off).
- no A<0 tokens -> lower = L0; no A>0 tokens -> upper = U0 (quantile, balance);
  all masked -> (L0, U0).
Ratios at masked positions are ignored (may hold anything); NaN in valid ratios is not handled.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from calclip_jax.knob_rules import above, at_least, one_of, within
from calclip_jax.rl.losses import broadcast_advantages
from calclip_jax.rl.quantile import masked_order_statistic, weighted_select

UPPER_RULES = ("balance", "quantile", "scaled", "fixed")
SOLVERS = ("auto", "sort", "bisect")
SAMPLES = ("minibatch", "batch")
CALIB_METRICS = (  # the aux metrics of `calibrated_bounds_with_aux`
    "calib_q_lower",
    "calib_q_upper",
    "calib_balance_target",
    "calib_balance_ratio",
    "calib_upper_raw",
    "calib_upper_capped",
    "calib_lower_raw",
    "calib_lower_floored",
)


@dataclasses.dataclass(frozen=True)
class CalibrationConfig:
    """Knobs of Calibrated Clipping and of the BF16 shadow it compares against. Periods count RL
    steps: RL steps 1, 1 + period, ... calibrate, never from an update at theta == theta_old
    (`takes_calibration_sample`; see `train/update_step.py`, `train/pooled_calibration.py`)."""

    enabled: bool = False  # off: static bounds (no shadow forwards unless shadow_every is set)
    upper_rule: str = "balance"  # one of UPPER_RULES
    period: int = 1  # calibrate in every `period`-th RL step (rollout batch); the paper: 20
    ema_beta: float = 0.0  # bounds <- beta * old + (1 - beta) * new per calibration; 0 = none
    upper_max: float | None = None  # cap on the upper bound; None -> 1 + 2 * eps_high
    lower_min: float | None = None  # floor under the lower bound; None -> max(0, 1 - 2 * eps_low)
    solver: str = "auto"  # order statistics / balance solve: auto | sort | bisect
    shadow_precision: str = "bf16"  # precision preset name of the reference (shadow) forwards
    sample: str = "minibatch"  # the calibration sample: minibatch (each update j >= 2 its own) |
    # batch (every minibatch of the RL step at theta_1, pooled once; train/pooled_calibration.py)
    shadow_every: int | None = None  # measure the shadow's clip shares in every K-th RL step (1,
    # 1 + K, ...) at each update where theta != theta_old, calibration on or off; None = only
    # where calibration needs it

    def __post_init__(self) -> None:
        one_of(self, "upper_rule", UPPER_RULES)
        one_of(self, "solver", SOLVERS)
        one_of(self, "sample", SAMPLES)
        at_least(self, 1, "period", "shadow_every")
        within(self, "ema_beta", "[0, 1)")
        above(self, 1, "upper_max")  # the upper bound's floor is 1 (see the module docstring)
        within(self, "lower_min", "[0, 1)")  # below the static lower bound: `check_calibration`

    def bounds_kwargs(self) -> dict:
        """Keyword arguments of `calibrated_bounds` fixed by this config."""
        return {
            "upper_rule": self.upper_rule,
            "upper_max": self.upper_max,
            "lower_min": self.lower_min,
            "solver": self.solver,
        }

    @property
    def traces_shadow(self) -> bool:
        """Whether the update step and its minibatches carry the shadow's log-probs at all."""
        return self.enabled or self.shadow_every is not None

    @property
    def pooled(self) -> bool:
        """Whether a calibrating RL step calibrates once, on all its minibatches."""
        return self.enabled and self.sample == "batch"

    @property
    def per_update(self) -> bool:
        """Whether each update of a calibrating RL step calibrates on its own minibatch."""
        return self.enabled and self.sample == "minibatch"

    def calibrates(self, rl_step: int) -> bool:
        """Whether RL step `rl_step` (1-based) calibrates (`calibrating_rl_step`)."""
        return self.enabled and calibrating_rl_step(rl_step, self.period)

    def measures_shadow(self, rl_step: int) -> bool:
        """Whether the updates of RL step `rl_step` measure the shadow's ratio (where theta !=
        theta_old): every `shadow_every`-th RL step, and each calibrating one with `per_update`
        (its updates calibrate on it). A pooled calibration measures its own."""
        every = self.shadow_every is not None and calibrating_rl_step(rl_step, self.shadow_every)
        return every or (self.per_update and self.calibrates(rl_step))


def calibrating_rl_step(rl_step: int, period: int) -> bool:
    """Whether RL step `rl_step` (1-based) calibrates: RL steps 1, 1 + period, 1 + 2 period, ..."""
    return (rl_step - 1) % period == 0


def takes_calibration_sample(calibrating: Any, updates_applied: Any) -> Any:
    """Whether an update of a calibrating RL step samples the bounds: only once an update has
    been applied since the batch began (at theta == theta_old every ratio is 1, a degenerate
    sample). Works on host bools / ints and on traced jax arrays alike."""
    return calibrating & (updates_applied > 0)


def lower_floor(lower_min: Any, eps_low: Any) -> Any:
    """The floor under the calibrated lower bound: `lower_min`, or max(0, 1 - 2 eps_low) when
    None (mirroring upper_max's 1 + 2 eps_high). Host floats or traced arrays alike."""
    if lower_min is not None:
        return lower_min
    return jnp.maximum(0.0, 1.0 - 2.0 * jnp.asarray(eps_low, jnp.float32))


def _match_count_below(
    ratio_N: jax.Array, sel_N: jax.Array, k: jax.Array, static: jax.Array, method: str
) -> jax.Array:
    """Point closest to `static` among L with count(sel & ratio < L) == k."""
    c_static = jnp.sum(sel_N & (ratio_N < static))
    stats = masked_order_statistic(ratio_N, sel_N, jnp.stack([k, k - 1]), method=method)
    above = jnp.nextafter(stats[1], jnp.float32(jnp.inf))
    return jnp.where(c_static == k, static, jnp.where(c_static > k, stats[0], above))


def _match_count_at_most(
    ratio_N: jax.Array, sel_N: jax.Array, m: jax.Array, static: jax.Array, method: str
) -> jax.Array:
    """Point closest to `static` among U with count(sel & ratio <= U) == m."""
    c_static = jnp.sum(sel_N & (ratio_N <= static))
    stats = masked_order_statistic(ratio_N, sel_N, jnp.stack([m, m - 1]), method=method)
    below = jnp.nextafter(stats[0], jnp.float32(-jnp.inf))
    return jnp.where(c_static == m, static, jnp.where(c_static > m, below, stats[1]))


def calibrated_bounds_with_aux(
    ratio: jax.Array,
    ratio_ref: jax.Array,
    advantages: jax.Array,
    mask: jax.Array,
    *,
    eps_low: jax.Array | float,
    eps_high: jax.Array | float,
    upper_rule: str = "balance",
    upper_max: jax.Array | float | None = None,
    upper_min: float = 1.0,
    lower_min: jax.Array | float | None = None,
    lower_max: float = 1.0,
    solver: str = "auto",
    balance_rtol: float = 1e-4,
) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
    """`calibrated_bounds` plus aux metrics (calib_q_lower, calib_q_upper, calib_balance_target,
    calib_balance_ratio, calib_upper_raw (before the cap; float32 max when the balance target is
    unreachable), calib_upper_capped (1.0 when the cap bound), calib_lower_raw (before the
    clamp), calib_lower_floored (1.0 when the floor bound). `solver`: auto | sort | bisect."""
    if upper_rule not in UPPER_RULES:
        raise ValueError(f"upper_rule must be one of {UPPER_RULES}, got {upper_rule!r}")
    valid_BT = mask.astype(bool)
    adv_N = jnp.ravel(jnp.where(valid_BT, broadcast_advantages(advantages, mask.shape), 0.0))
    valid_N = jnp.ravel(valid_BT)
    r_N = jnp.where(valid_N, jnp.ravel(ratio).astype(jnp.float32), 1.0)
    rr_N = jnp.where(valid_N, jnp.ravel(ratio_ref).astype(jnp.float32), 1.0)
    neg_N, pos_N = adv_N < 0, adv_N > 0
    n_neg, n_pos = jnp.sum(neg_N), jnp.sum(pos_N)
    lower0 = jnp.asarray(1.0 - eps_low, jnp.float32)
    upper0 = jnp.asarray(1.0 + eps_high, jnp.float32)
    cap = 1.0 + 2.0 * jnp.asarray(eps_high, jnp.float32) if upper_max is None else upper_max

    k_low = jnp.sum(neg_N & (rr_N < lower0))
    lower_raw = _match_count_below(r_N, neg_N, k_low, lower0, solver)
    floor = lower_floor(lower_min, eps_low)
    lower = jnp.clip(lower_raw, floor, lower_max)

    k_up = jnp.sum(pos_N & (rr_N > upper0))
    absadv_N = jnp.abs(adv_N)
    g_neg_ref = jnp.sum(jnp.where(neg_N & (rr_N >= lower0), absadv_N * rr_N, 0.0))
    g_pos_ref = jnp.sum(jnp.where(pos_N & (rr_N <= upper0), absadv_N * rr_N, 0.0))
    g_neg = jnp.sum(jnp.where(neg_N & (r_N >= lower), absadv_N * r_N, 0.0))
    defined = (g_neg_ref > 0) & (g_neg > 0)
    target_ratio = jnp.where(defined, g_pos_ref / jnp.where(defined, g_neg_ref, 1.0), 0.0)
    if upper_rule == "fixed":
        upper = upper0
    elif upper_rule == "scaled":
        upper = 1.0 + (1.0 - lower) * jnp.asarray(eps_high, jnp.float32) / eps_low
    elif upper_rule == "quantile":
        upper = _match_count_at_most(r_N, pos_N, n_pos - k_up, upper0, solver)
    else:
        w_N = jnp.where(pos_N, absadv_N * r_N, 0.0)
        thresh = target_ratio * g_neg * (1.0 - balance_rtol)
        s_lo, _ = weighted_select(r_N, w_N, thresh, method=solver)
        s_hi = jnp.min(jnp.where(pos_N & (r_N > s_lo), r_N, jnp.inf))
        solved = jnp.clip(upper0, s_lo, jnp.nextafter(s_hi, jnp.float32(-jnp.inf)))
        upper = jnp.where(defined, jnp.where(jnp.isinf(s_lo) & (s_lo > 0), jnp.inf, solved), upper0)
    upper_raw = upper
    upper = jnp.clip(upper, jnp.maximum(upper_min, lower), cap)
    g_pos = jnp.sum(jnp.where(pos_N & (r_N <= upper), absadv_N * r_N, 0.0))
    aux = {
        "calib_q_lower": k_low / jnp.maximum(n_neg, 1),
        "calib_q_upper": k_up / jnp.maximum(n_pos, 1),
        "calib_balance_target": target_ratio,
        "calib_balance_ratio": g_pos / jnp.where(g_neg > 0, g_neg, 1.0),
        "calib_upper_raw": jnp.minimum(upper_raw, jnp.finfo(jnp.float32).max),
        "calib_upper_capped": (upper_raw > cap).astype(jnp.float32),
        "calib_lower_raw": lower_raw,
        "calib_lower_floored": (lower_raw < floor).astype(jnp.float32),
    }
    return lower, upper, aux


def calibrated_bounds(*args: Any, **kwargs: Any) -> tuple[jax.Array, jax.Array]:
    """Calibrated (lower, upper) float32 scalars (see the module docstring):
    `calibrated_bounds_with_aux`, same arguments, without its aux metrics."""
    lower, upper, _ = calibrated_bounds_with_aux(*args, **kwargs)
    return lower, upper


def smooth_bounds(
    prev: tuple[jax.Array, jax.Array], new: tuple[jax.Array, jax.Array], beta: jax.Array | float
) -> tuple[jax.Array, jax.Array]:
    """EMA of (lower, upper): beta * prev + (1 - beta) * new (beta = 0 takes `new`)."""
    return tuple(beta * p + (1.0 - beta) * n for p, n in zip(prev, new, strict=True))
