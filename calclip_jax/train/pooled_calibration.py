"""`calibration.sample = "batch"`: one calibration per calibrating RL step, on a sample pooled
over all of its minibatches.

With "minibatch" each update j >= 2 of a calibrating RL step calibrates on its own minibatch: on
SmolLM2's workload about 27 A<0 tokens, too few to place the lower bound at the shadow's clip
share (a 1% quantile). With "batch":

1. the step's first update runs at theta_old on the carried bounds, as always;
2. once an update has been applied (theta_1 != theta_old; after a skipped first update, the first
   applied one: never a theta_old sample), the trainer's and the shadow's log-probs of every
   minibatch of the first epoch (each rollout row once) are computed at the current parameters,
   without gradient, each minibatch in its own composition and by the compiled forward that gave
   its old log-probs at theta_old (the forward program under `train.same_forward`, the one the
   updates' loss reads too; otherwise the minibatch forward of the old log-probs): at equal
   parameters every ratio of the sample would be exactly 1;
3. their ratios against each minibatch's old log-probs, pooled, give `calibrated_bounds` once,
   EMA-smoothed into the state (non-finite bounds leave it alone): the step's later updates use
   them and the following non-calibrating RL steps keep them.

Not a buffer of the updates' own samples: with one epoch the first minibatch's update runs at
theta_old, so a buffer would miss one minibatch, and its bounds would only serve the next RL step.
The price: the sample sits one update from theta_old, where update j's ratios are j - 1 updates
away. Cost per calibrating RL step: a trainer and a shadow forward per minibatch (with
same_forward the next update reuses its minibatch's), plus the first minibatch's old-policy
forwards; the updates then run no shadow forward unless `shadow_every` asks for their shares.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from calclip_jax.config.spec import UpdateConfig
from calclip_jax.rl.calibration import calibrated_bounds_with_aux, smooth_bounds
from calclip_jax.rl.losses import clamped_ratio
from calclip_jax.train.forward_program import SHADOW_KEY
from calclip_jax.train.state import TrainState

Forward = Callable[[TrainState, dict[str, Any]], dict[str, jax.Array]]  # -> logp, shadow_logp
SAMPLE_KEYS = ("ratio", "ratio_ref", "advantages", "response_mask")


@jax.jit
def pool_sample(new: list[dict[str, jax.Array]], minibatches: list[dict[str, Any]]) -> dict:
    """The pooled sample: each minibatch's trainer ratio (new "logp" against its "old_logp") and
    shadow ratio (new "shadow_logp" against "old_logp_ref"), `clamped_ratio` as in the update,
    with its advantages and response mask, concatenated along rows."""
    parts = []
    for out, mb in zip(new, minibatches, strict=True):
        mask = mb["response_mask"]
        parts.append(
            {
                "ratio": clamped_ratio(out["logp"], mb["old_logp"], mask),
                "ratio_ref": clamped_ratio(out[SHADOW_KEY], mb["old_logp_ref"], mask),
                "advantages": mb["advantages"],
                "response_mask": mask,
            }
        )
    return {k: jnp.concatenate([p[k] for p in parts]) for k in SAMPLE_KEYS}


def make_pooled_calibration(
    cfg: UpdateConfig, forward: Forward
) -> Callable[[TrainState, list[dict[str, Any]]], tuple[TrainState, dict, list[dict]]]:
    """calibrate(state, minibatches) -> (state with the pooled bounds, metrics, the forward's
    outputs per minibatch). `forward(state, mb)` gives a minibatch's "logp" and "shadow_logp" at
    the state's parameters by the program that computed its old log-probs. The caller calls it
    only once an update of the batch has been applied (`state.batch_updates > 0`)."""
    rl, calib = cfg.rl, cfg.calibration

    @jax.jit
    def bounds_of(bounds: tuple, sample: dict) -> tuple[tuple, dict]:
        lower, upper, aux = calibrated_bounds_with_aux(
            sample["ratio"],
            sample["ratio_ref"],
            sample["advantages"],
            sample["response_mask"],
            eps_low=rl.eps_low,
            eps_high=rl.eps_high,
            **calib.bounds_kwargs(),
        )
        smoothed = smooth_bounds(bounds, (lower, upper), calib.ema_beta)
        ok = jnp.isfinite(smoothed[0]) & jnp.isfinite(smoothed[1])
        new = tuple(jnp.where(ok, s, b) for s, b in zip(smoothed, bounds, strict=True))
        return new, {**aux, "calibrated": ok.astype(jnp.float32)}

    def calibrate(state: TrainState, minibatches: list[dict[str, Any]]):
        outs = [forward(state, mb) for mb in minibatches]
        new = [{k: out[k] for k in ("logp", SHADOW_KEY)} for out in outs]
        keys = ("old_logp", "old_logp_ref", "advantages", "response_mask")
        sample = pool_sample(new, [{k: mb[k] for k in keys} for mb in minibatches])
        (lower, upper), metrics = bounds_of((state.clip_lower, state.clip_upper), sample)
        state = state.replace(
            clip_lower=jax.device_put(lower, state.clip_lower.sharding),
            clip_upper=jax.device_put(upper, state.clip_upper.sharding),
        )
        return state, metrics, outs

    return calibrate
