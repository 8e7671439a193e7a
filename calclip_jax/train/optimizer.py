"""optax AdamW with global-norm clipping and a warmup + decay schedule; the update skipped on
non-finite gradients."""

from __future__ import annotations

from typing import Any

import jax
import optax

from calclip_jax.config.schema import TrainConfig


def make_schedule(cfg: TrainConfig) -> optax.Schedule:
    """Linear warmup to the peak, then constant / cosine / linear decay."""
    if cfg.schedule == "constant":
        decay = optax.constant_schedule(cfg.learning_rate)
    elif cfg.schedule == "cosine":
        decay = optax.cosine_decay_schedule(cfg.learning_rate, max(cfg.decay_updates, 1))
    else:
        decay = optax.linear_schedule(cfg.learning_rate, 0.0, max(cfg.decay_updates, 1))
    if cfg.warmup_updates <= 0:
        return decay
    warmup = optax.linear_schedule(0.0, cfg.learning_rate, cfg.warmup_updates)
    return optax.join_schedules([warmup, decay], [cfg.warmup_updates])


def make_optimizer(cfg: TrainConfig) -> optax.GradientTransformation:
    """AdamW on float32 master weights, after global-norm clipping when enabled."""
    adamw = optax.adamw(
        make_schedule(cfg), b1=cfg.b1, b2=cfg.b2, eps=cfg.eps, weight_decay=cfg.weight_decay
    )
    if cfg.grad_clip_norm is not None:
        return optax.chain(optax.clip_by_global_norm(cfg.grad_clip_norm), adamw)
    return adamw


def apply_if_finite(
    tx: optax.GradientTransformation, finite: jax.Array, grads: Any, params: Any, opt_state: Any
) -> tuple[Any, Any]:
    """(params, opt_state) after `tx`'s update where `finite`, else both unchanged. A branch, not
    a select: a select would read the updated and the old params and moments and write them
    again, three more passes over every float each update."""

    def apply(_: None) -> tuple[Any, Any]:
        updates, new_opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), new_opt_state

    return jax.lax.cond(finite, apply, lambda _: (params, opt_state), None)
