"""The update step: one optimizer update, (state, minibatch, flags) -> (state, metrics).

FP8 (or BF16) forward + backward per the trainer recipe, mismatch correction weights, the PPO
loss with the carried clip bounds, optax update (skipped when gradients are non-finite),
delayed-scaling state update, and Calibrated Clipping.

theta == theta_old while no update has been applied since the rollout batch began
(`state.batch_updates == 0` after `flags["new_batch"]` resets it). There the step takes its own
forward (stop-gradient) as the old log-probs, so the ratio is exactly 1 by construction, and
reports `old_logp_recompute_gap`: max |own forward - batch["old_logp"]|, the difference between
the precomputed old log-probs and the step's forward under the same composition (0 when the two
programs agree bitwise; NaN when they were not precomputed, `PPOUpdater.prepare(first_old=False)`),
and `old_logp_recompute_gap_frac`: the share of valid tokens where it exceeds GAP_LOG_THRESHOLD
(log 1.2, a ratio off by 20%: beyond any clip bound's reach).

The BF16 shadow is measured where `flags["shadow"]` (the updater sets it for every update of an RL
step that `CalibrationConfig.measures_shadow`: `calibration.shadow_every`, or calibration's own
need) and theta != theta_old: a no-grad shadow forward of the current policy gives reference
ratios against the old policy's shadow log-probs (batch["old_logp_ref"], same minibatch), whose
clip shares at the static bounds are logged beside the trainer's (`SHADOW_METRICS`), on the same
tokens. With calibration off the bounds stay static whatever is measured.

Calibration (`calibration.sample="minibatch"`) runs when `flags["calibrate"]` (every update of a
calibrating RL step) and theta != theta_old: the calibrated (lower, upper) of the update's own
FP8 ratios against the shadow's are EMA-smoothed into the state. An update at theta_old never
calibrates nor smooths (its ratios are all 1: a degenerate sample), nor do non-finite bounds or a
skipped (non-finite) update. The FP8 ratio it calibrates is the one of the differentiated forward
itself: no extra FP8 forward is paid. With `sample="batch"` the step never calibrates: the
updater sets the bounds from a sample pooled over the RL step (`train/pooled_calibration.py`).

Delayed scaling with frozen scales (`UpdateConfig.frozen_scales`, `train.delayed_scales="batch"`):
every forward of a rollout batch scales from the amax histories as the batch began
(`flags[BATCH_FP8_META]`), so at equal parameters the old and new log-probs scale alike; the
update pushes what its forward and backward observed into `state.fp8_meta`, which the next batch
scales from. With "update" each update scales from the histories the previous one pushed.

Two knobs split the fused gradient program (`UpdateConfig`): with `micro_batches` > 1 the loss's
log-probs come from a no-grad forward over the micro-batches and the gradient from a VJP per
micro-batch (`train/micro_batches.py`); with `same_forward` (the default) those log-probs arrive
in the minibatch from the forward program that also computed the old ones, the shadow's from the
shadow program that computed its old ones (`train/forward_program.py`), and the gradient is
pulled back the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from calclip_jax.config.spec import UpdateConfig
from calclip_jax.fp8.delayed import merge_fp8_meta, newest_amaxes, push_amaxes
from calclip_jax.model import ModelConfig
from calclip_jax.rl.calibration import (
    calibrated_bounds_with_aux,
    smooth_bounds,
    takes_calibration_sample,
)
from calclip_jax.rl.corrections import mismatch_weights
from calclip_jax.rl.diagnostics import SHADOW_METRICS, rl_diagnostics
from calclip_jax.rl.losses import clamped_ratio, ppo_policy_loss
from calclip_jax.train.forward import FORWARD_KEYS, Batch, batch_logprobs
from calclip_jax.train.forward_program import SHADOW_KEY
from calclip_jax.train.micro_batches import accumulate_vjp, map_micro
from calclip_jax.train.optimizer import apply_if_finite
from calclip_jax.train.state import TrainState

Metrics = dict[str, jax.Array]
Flags = dict[str, jax.Array]
GAP_LOG_THRESHOLD = float(np.log(1.2))  # `old_logp_recompute_gap_frac` counts |gap| above this
BATCH_FP8_META = "batch_fp8_meta"  # the flag of the histories a batch scales from (frozen)


def update_flags(
    new_batch: bool, calibrate: bool, shadow: bool | None = None, batch_fp8_meta: Any = None
) -> Flags:
    """Per-update flags: first update of a rollout batch; update of a calibrating RL step; update
    of an RL step that measures the shadow (None: `calibrate`); with frozen delayed scales
    (`UpdateConfig.frozen_scales`) the amax histories as the rollout batch began, which every
    forward of the batch scales from (BATCH_FP8_META; without it an update scales from the
    state's histories, as when it is the batch's only update)."""
    shadow = calibrate if shadow is None else shadow
    flags = {
        "new_batch": np.bool_(new_batch),
        "calibrate": np.bool_(calibrate),
        "shadow": np.bool_(shadow),
    }
    if batch_fp8_meta is not None:
        flags[BATCH_FP8_META] = batch_fp8_meta
    return flags


def make_update_step(
    model_config: ModelConfig, cfg: UpdateConfig, tx: optax.GradientTransformation
) -> Callable[[TrainState, Batch, Flags], tuple[TrainState, Metrics]]:
    """The un-jitted step(state, batch, flags); flags from `update_flags`. See `jit_update_step`
    for the sharded, donated version."""
    rl, calib = cfg.rl, cfg.calibration
    traced, per_update = calib.traces_shadow, calib.per_update
    temperature, chunk, shared = cfg.temperature, cfg.logprob_chunk, cfg.shared_prompt
    static_bounds = tuple(jnp.float32(b) for b in rl.clip_bounds)
    use_kl = rl.kl_beta > 0
    micro, group = cfg.micro_batches, 1 if shared is None else shared.group_size
    frozen = cfg.frozen_scales

    def trainer_forward(params: Any, fp8_meta: Any, rows: Batch) -> tuple:
        return batch_logprobs(
            model_config,
            cfg.recipe,
            params,
            fp8_meta,
            rows,
            update_fp8_meta=True,
            temperature=temperature,
            chunk=chunk,
            shared_prompt=shared,
        )

    def shadow_ratio(params: Any, batch: Batch, do_shadow: jax.Array) -> jax.Array:
        def compute(p: Any) -> jax.Array:
            forward = lambda rows: batch_logprobs(
                model_config,
                cfg.shadow_recipe,
                p,
                {},
                rows,
                temperature=temperature,
                chunk=chunk,
                shared_prompt=shared,
            )[0]
            return map_micro(forward, {k: batch[k] for k in FORWARD_KEYS}, micro, group)

        logp_ref_BT = lax.cond(
            do_shadow,
            compute,
            lambda p: jnp.zeros_like(batch["old_logp"]),
            lax.stop_gradient(params),
        )
        return clamped_ratio(logp_ref_BT, batch["old_logp_ref"], batch["response_mask"])

    def step(state: TrainState, batch: Batch, flags: Flags) -> tuple[TrainState, Metrics]:
        mask_BT, adv = batch["response_mask"], batch["advantages"]
        # what the forwards scale from (without the flag, as for one update: the state's)
        scales = flags.get(BATCH_FP8_META, state.fp8_meta) if frozen else state.fp8_meta
        applied = jnp.where(flags["new_batch"], 0, state.batch_updates)
        at_old = applied == 0  # no update applied since the batch began: theta == theta_old
        off = jnp.bool_(False)
        do_calib = takes_calibration_sample(flags["calibrate"], applied) if per_update else off
        measured = flags["shadow"] | (flags["calibrate"] & per_update)
        do_shadow = takes_calibration_sample(measured, applied)
        ratio_ref_BT = None
        if traced and cfg.same_forward:  # the forward program's, on the same minibatch
            logp_ref_BT = jnp.where(do_shadow, batch[SHADOW_KEY], 0.0)
            ratio_ref_BT = clamped_ratio(logp_ref_BT, batch["old_logp_ref"], mask_BT)
        elif traced:
            ratio_ref_BT = shadow_ratio(state.params, batch, do_shadow)

        def policy_loss(logp_BT: jax.Array) -> tuple[jax.Array, tuple]:
            own_BT = lax.stop_gradient(logp_BT)
            old_logp_BT = jnp.where(at_old, own_BT, batch["old_logp"])
            weights_BT, keep_BT, corr_aux = mismatch_weights(
                old_logp_BT, batch["rollout_logp"], mask_BT, rl.correction
            )
            bounds = (state.clip_lower, state.clip_upper)
            calib_aux: Metrics = {}
            smoothed_in = jnp.bool_(False)
            if per_update:
                ratio_BT = clamped_ratio(own_BT, old_logp_BT, mask_BT)
                lower, upper, calib_aux = calibrated_bounds_with_aux(
                    ratio_BT,
                    ratio_ref_BT,
                    adv,
                    mask_BT,
                    eps_low=rl.eps_low,
                    eps_high=rl.eps_high,
                    **calib.bounds_kwargs(),
                )
                smoothed = smooth_bounds(bounds, (lower, upper), calib.ema_beta)
                smoothed_in = do_calib & jnp.isfinite(smoothed[0]) & jnp.isfinite(smoothed[1])
                bounds = tuple(
                    jnp.where(smoothed_in, s, b) for s, b in zip(smoothed, bounds, strict=True)
                )
            loss, loss_aux = ppo_policy_loss(
                logp_BT,
                old_logp_BT,
                adv,
                mask_BT.astype(bool) & keep_BT,
                eps_low=rl.eps_low,
                eps_high=rl.eps_high,
                bounds=bounds,
                dual_clip_c=rl.dual_clip_c,
                is_weights=weights_BT,
                agg=rl.agg,
                ref_logp=batch["ref_logp"] if use_kl else None,
                kl_beta=rl.kl_beta,
                kl_estimator=rl.kl_estimator,
            )
            extra = {**corr_aux, **calib_aux}
            return loss, (loss_aux, old_logp_BT, bounds, smoothed_in, weights_BT, extra)

        if micro == 1 and not cfg.same_forward:

            def loss_fn(params: Any, fp8_meta: Any):
                logp_BT, entropy_BT, new_meta = trainer_forward(params, fp8_meta, batch)
                loss, aux = policy_loss(logp_BT)
                return loss, (logp_BT, entropy_BT, new_meta, aux)

            grad_fn = jax.grad(loss_fn, argnums=(0, 1), has_aux=True)
            (grads, meta_grads), (logp_BT, entropy_BT, new_meta, aux) = grad_fn(
                state.params, scales
            )
            seen = merge_fp8_meta(new_meta, meta_grads) if scales else scales
            fp8_meta = push_amaxes(state.fp8_meta, newest_amaxes(seen)) if frozen else seen
        else:  # the loss's log-probs, then a VJP per micro-batch (`train/micro_batches.py`)
            rows = {k: batch[k] for k in FORWARD_KEYS}

            def logp_of(params: Any, fp8_meta: Any, part: Batch) -> tuple[jax.Array, Any]:
                logp_BT, _, pushed = trainer_forward(params, fp8_meta, part)
                return logp_BT, pushed

            if cfg.same_forward:  # computed by the forward program (`train/forward_program.py`)
                logp_BT, entropy_BT = batch["logp"], batch["entropy"]
            else:
                logp_BT, entropy_BT = map_micro(
                    lambda r: trainer_forward(state.params, scales, r)[:2], rows, micro, group
                )
            cotangent_BT, aux = jax.grad(policy_loss, has_aux=True)(logp_BT)
            grads, seen = accumulate_vjp(
                logp_of, state.params, scales, rows, cotangent_BT, micro, group
            )  # delayed scaling here is frozen (`UpdateConfig`): push what the update observed
            fp8_meta = push_amaxes(state.fp8_meta, seen) if scales else state.fp8_meta
        loss_aux, old_logp_BT, bounds, smoothed_in, weights_BT, extra = aux
        grad_norm = optax.tree.norm(grads)
        finite = jnp.isfinite(grad_norm)
        params, opt_state = apply_if_finite(tx, finite, grads, state.params, state.opt_state)
        new_state = state.replace(
            update_count=state.update_count + 1,
            params=params,
            opt_state=opt_state,
            fp8_meta=jax.tree.map(partial(jnp.where, finite), fp8_meta, state.fp8_meta),
            clip_lower=jnp.where(finite, bounds[0], state.clip_lower),
            clip_upper=jnp.where(finite, bounds[1], state.clip_upper),
            skipped_updates=state.skipped_updates + (~finite).astype(jnp.int32),
            batch_updates=applied + finite.astype(jnp.int32),
        )
        metrics = rl_diagnostics(
            logp_BT,
            old_logp_BT,
            adv,
            mask_BT,
            bounds,
            rollout_logp_BT=batch["rollout_logp"],
            entropy=entropy_BT,
            ratio_ref_BT=ratio_ref_BT,
            ref_bounds=static_bounds,
            ref_logp_BT=batch["ref_logp"] if use_kl else None,
            dual_clip_c=rl.dual_clip_c,
            is_weights_BT=weights_BT,
        )
        nan = jnp.float32(jnp.nan)
        # the shadow's clip shares: where measured; at theta_old r_ref == 1 exactly, so 0 there
        # (in an RL step that measures it, like the trainer's own share); else NaN
        ref_at_old = jnp.where(at_old & measured, 0.0, nan)
        for name in SHADOW_METRICS:
            if name in metrics:
                metrics[name] = jnp.where(do_shadow, metrics[name], ref_at_old)
        for name, value in extra.items():
            if name.startswith("calib_"):
                value = jnp.where(do_calib, value, nan)
            metrics[name] = value
        valid_BT = mask_BT.astype(bool)
        abs_max = lambda x_BT: jnp.max(jnp.where(valid_BT, jnp.abs(x_BT), 0.0))
        # at theta_old: the precomputed old log-probs vs this step's own forward (same inputs)
        gap_BT = jnp.abs(logp_BT - batch["old_logp"])
        wide = jnp.sum(valid_BT & (gap_BT > GAP_LOG_THRESHOLD)) / jnp.maximum(jnp.sum(valid_BT), 1)
        wide = jnp.where(jnp.any(valid_BT & jnp.isnan(gap_BT)), nan, wide)  # not precomputed
        metrics["old_logp_recompute_gap"] = jnp.where(at_old, abs_max(gap_BT), nan)
        metrics["old_logp_recompute_gap_frac"] = jnp.where(at_old, wide, nan)
        metrics.update(
            loss=loss_aux["pg_loss"] + rl.kl_beta * loss_aux.get("kl_loss", 0.0),
            pg_loss=loss_aux["pg_loss"],
            clip_frac=loss_aux["clip_frac"],
            grad_norm=grad_norm,
            update_skipped=(~finite).astype(jnp.float32),
            skipped_updates=new_state.skipped_updates.astype(jnp.float32),
            calibrated=(smoothed_in & finite).astype(jnp.float32),
            at_theta_old=at_old.astype(jnp.float32),
            ratio_log_abs_max=abs_max(logp_BT - old_logp_BT),
        )
        return new_state, {k: jnp.asarray(v, jnp.float32) for k, v in metrics.items()}

    return step
