"""optax AdamW with global-norm clipping and a warmup + decay schedule."""

from __future__ import annotations

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
