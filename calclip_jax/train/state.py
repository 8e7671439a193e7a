"""The train state: one pytree holding everything an update reads and writes."""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import optax

from calclip_jax.fp8 import FP8_META, PrecisionRecipe
from calclip_jax.model import ModelConfig, Transformer


class TrainState(flax.struct.PyTreeNode):
    """update_count: optimizer updates run (skipped ones included);
    params: float32 master weights; fp8_meta: delayed-scaling amax histories ({} if unused);
    clip_lower / clip_upper: the clip bounds in use (carried, EMA-smoothed under calibration);
    skipped_updates: count of steps whose gradients were non-finite and were not applied;
    batch_updates: updates applied since the current rollout batch began (0: theta == theta_old)."""

    update_count: jax.Array
    params: Any
    opt_state: Any
    fp8_meta: Any
    clip_lower: jax.Array
    clip_upper: jax.Array
    skipped_updates: jax.Array
    batch_updates: jax.Array


def init_variables(
    model_config: ModelConfig, recipe: PrecisionRecipe, rng: jax.Array, seq_len: int = 8
) -> tuple[Any, Any]:
    """(params, fp8_meta) of a fresh model; fp8_meta is {} unless a role uses delayed scaling."""
    tokens = jnp.zeros((1, seq_len), jnp.int32)
    positions = jnp.arange(seq_len, dtype=jnp.int32)[None]
    variables = Transformer(model_config, recipe).init(
        rng, tokens, positions, jnp.ones_like(tokens)
    )
    return variables["params"], dict(variables.get(FP8_META, {}))


def fresh_fp8_meta(model_config: ModelConfig, recipe: PrecisionRecipe) -> Any:
    """`init_variables(...)[1]` (zero amax histories; {} without delayed scaling), computed
    without initializing the params: one jitted program instead of the whole eager init."""
    meta = lambda: init_variables(model_config, recipe, jax.random.key(0))[1]
    return jax.jit(meta)() if jax.tree.leaves(jax.eval_shape(meta)) else {}


def on_default_device(shapes: Any) -> Any:
    """ShapeDtypeStructs of `shapes` placed where a fresh array lands (this process's first
    device): the restore target of arrays saved from one device."""
    device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    return jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=device), shapes)


def create_train_state(
    params: Any,
    fp8_meta: Any,
    tx: optax.GradientTransformation,
    clip_bounds: tuple[float, float],
) -> TrainState:
    """The state before any update, with the static `clip_bounds` (`RLPreset.clip_bounds`) as
    the carried bounds' warm start."""
    return TrainState(
        update_count=jnp.zeros((), jnp.int32),
        params=params,
        opt_state=tx.init(params),
        fp8_meta=fp8_meta,
        clip_lower=jnp.float32(clip_bounds[0]),
        clip_upper=jnp.float32(clip_bounds[1]),
        skipped_updates=jnp.zeros((), jnp.int32),
        batch_updates=jnp.zeros((), jnp.int32),
    )
