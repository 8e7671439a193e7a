"""The one factory of what updates the policy: optimizer -> train state on the mesh -> jitted,
donating update step -> PPO updater. The RL loop, the probes, the benchmarks and the tests build
their trainer here, so all of them run the same wiring."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from jax.sharding import Mesh

from calclip_jax.config.schema import TrainConfig
from calclip_jax.config.spec import RunSpec, UpdateConfig
from calclip_jax.model import ModelConfig
from calclip_jax.parallel.mesh import make_mesh
from calclip_jax.train.optimizer import make_optimizer
from calclip_jax.train.ppo_update import PPOUpdater, minibatch_keys
from calclip_jax.train.sharded import jit_update_step, shard_state
from calclip_jax.train.state import TrainState, create_train_state, fresh_fp8_meta
from calclip_jax.train.update_step import make_update_step


@dataclasses.dataclass
class Trainer:
    """The optimizer, the sharded train state, the jitted update step (it donates the state:
    keep only what it returns) and the PPO updater that drives it over a rollout batch."""

    tx: optax.GradientTransformation
    state: TrainState
    update_step: Callable[[TrainState, dict, dict], tuple[TrainState, dict]]
    updater: PPOUpdater


def build_trainer(
    model: ModelConfig,
    update: UpdateConfig,
    train: TrainConfig,
    params: Any,
    mesh: Mesh,
    *,
    epochs: int = 1,
    num_minibatches: int | None = None,
) -> Trainer:
    """A trainer from `params` (donated: pass a copy to keep them) with fresh amax histories.
    The KL reference is a copy of `params` when the RL config has kl_beta > 0.
    `num_minibatches` defaults to `train.num_minibatches`."""
    tx = make_optimizer(train)
    meta = fresh_fp8_meta(model, update.recipe)
    state = shard_state(create_train_state(params, meta, tx, update.rl.clip_bounds), mesh)
    # the state's buffers are donated to the update step: the KL reference is a copy
    ref_params = jax.tree.map(jnp.copy, state.params) if update.rl.kl_beta > 0 else None
    keys = dict.fromkeys(minibatch_keys(update))
    step = jit_update_step(make_update_step(model, update, tx), state, keys, mesh)
    minibatches = train.num_minibatches if num_minibatches is None else num_minibatches
    updater = PPOUpdater(model, update, step, epochs, minibatches, ref_params=ref_params)
    return Trainer(tx=tx, state=state, update_step=step, updater=updater)


def run_trainer(
    spec: RunSpec, params: Any, update: UpdateConfig | None = None, epochs: int | None = None
) -> Trainer:
    """`build_trainer` for a run: its model, its mesh, its train section; `update` and
    `epochs` default to the run's (`spec.update`, train.ppo_epochs)."""
    run = spec.config
    mesh = make_mesh(run.mesh.data, run.mesh.fsdp, run.mesh.tensor)
    return build_trainer(
        spec.model,
        spec.update if update is None else update,
        run.train,
        params,
        mesh,
        epochs=run.train.ppo_epochs if epochs is None else epochs,
    )
