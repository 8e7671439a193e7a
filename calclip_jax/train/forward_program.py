"""One compiled forward for the ratio's two sides (`train.same_forward`, on by default).

XLA compiles the forward inside the update's gradient program differently from a no-grad
forward, so the trainer's new log-probs (differentiated) and its old ones (precomputed) come
from two programs whose float rounding differs; with FP8 an ulp can cross a quantization step,
and the ratio at unchanged parameters is then off by far more than float32 rounding. With
`same_forward`, the log-probs the loss sees come from this one jitted program, called on theta_old
for the old log-probs and on the current parameters before each update: at equal parameters the
two are bitwise equal, so the ratio is exactly 1 at every update of a batch, not only the first.
The update then differentiates the loss with respect to those log-probs and pulls the cotangent
back through a recomputed forward (`micro_batches.accumulate_vjp`): one more forward per update.

The BF16 shadow's log-probs come from a program of their own (`make_shadow_program`), so the
shadow's old and new sides share a program too, and it runs only where a step reads the shadow:
at theta_old for the minibatches whose update calibrates on it or measures it
(`calibration.shadow_every`), or that a pooled calibration samples, and at those updates; not
for a batch's first update (at theta_old it measures nothing) nor for the updates of a pooled
calibration's RL step that measure no shadow. Delayed scaling takes the forward program with its
scales frozen within a rollout batch (`train.delayed_scales="batch"`); per-update scales are
refused (each call would push amaxes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from calclip_jax.config.spec import UpdateConfig
from calclip_jax.model import ModelConfig
from calclip_jax.train.forward import batch_logprobs
from calclip_jax.train.micro_batches import map_micro

PROGRAM_KEYS = ("logp", "entropy")  # what the program adds to a minibatch
SHADOW_KEY = "shadow_logp"  # and, where the shadow is traced, the shadow program this (or zeros)


def program_keys(cfg: UpdateConfig) -> tuple[str, ...]:
    """The minibatch keys the update step reads from the program (none without same_forward)."""
    if not cfg.same_forward:
        return ()
    return PROGRAM_KEYS + ((SHADOW_KEY,) if cfg.calibration.traces_shadow else ())


def _forward_kwargs(cfg: UpdateConfig) -> tuple[int, dict[str, Any]]:
    """(rows per prompt group, the `batch_logprobs` keywords of the update's forwards)."""
    shared = cfg.shared_prompt
    group = 1 if shared is None else shared.group_size
    return group, {
        "temperature": cfg.temperature,
        "chunk": cfg.logprob_chunk,
        "shared_prompt": shared,
    }


def make_forward_program(model_config: ModelConfig, cfg: UpdateConfig) -> Callable:
    """Jitted (params, fp8_meta, rows) -> {"logp", "entropy"} of the rows (exactly the
    `FORWARD_KEYS`: one input structure, one executable), over the update's micro-batches; the
    shadow's log-probs come from `make_shadow_program`."""
    group, kwargs = _forward_kwargs(cfg)

    @jax.jit
    def program(params: Any, fp8_meta: Any, rows: dict[str, Any]) -> dict:
        def forward(part: dict[str, jax.Array]) -> dict[str, jax.Array]:
            logp, entropy, _ = batch_logprobs(
                model_config, cfg.recipe, params, fp8_meta, part, **kwargs
            )
            return {"logp": logp, "entropy": entropy}

        return map_micro(forward, rows, cfg.micro_batches, group)

    return program


def make_shadow_program(model_config: ModelConfig, cfg: UpdateConfig) -> Callable:
    """Jitted (params, rows) -> the BF16 shadow's log-probs of the rows (`FORWARD_KEYS`), over
    the update's micro-batches: the one program of the shadow's old and new sides."""
    group, kwargs = _forward_kwargs(cfg)

    @jax.jit
    def program(params: Any, rows: dict[str, Any]) -> jax.Array:
        def forward(part: dict[str, jax.Array]) -> jax.Array:
            return batch_logprobs(model_config, cfg.shadow_recipe, params, {}, part, **kwargs)[0]

        return map_micro(forward, rows, cfg.micro_batches, group)

    return program
