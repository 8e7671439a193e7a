"""The jitted, sharded, state-donating update step and the shardings it is compiled with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
from jax.sharding import Mesh, NamedSharding

from calclip_jax.model.sharding import param_shardings
from calclip_jax.parallel.mesh import batch_sharding, replicated
from calclip_jax.train.state import TrainState


def state_shardings(state: TrainState, mesh: Mesh) -> Any:
    """Params and their optimizer moments by the model's partition rules; the rest replicated."""
    return param_shardings(state, mesh)  # the rules match optimizer moments by path suffix


def batch_shardings(batch: dict[str, Any], mesh: Mesh) -> dict[str, NamedSharding]:
    """Every batch array split over (data, fsdp) along its leading dimension."""
    return {k: batch_sharding(mesh) for k in batch}


def jit_update_step(
    step: Callable, state: TrainState, batch: dict[str, Any], mesh: Mesh
) -> Callable:
    """`jax.jit(step)` with explicit in/out shardings over `mesh` and the state donated; the
    per-update flags (`update_flags`) are replicated scalars.

    Host (NumPy) batches are placed on the mesh first: with several processes, jit refuses
    host inputs for split shardings, and each process holds the same full batch.
    """
    state_sh, batch_sh = state_shardings(state, mesh), batch_shardings(batch, mesh)
    flags_sh = replicated(mesh)
    jitted = jax.jit(
        step,
        in_shardings=(state_sh, batch_sh, flags_sh),
        out_shardings=(state_sh, replicated(mesh)),
        donate_argnums=0,
    )
    return lambda state, batch, flags: jitted(
        state, jax.device_put(batch, batch_sh), jax.device_put(flags, flags_sh)
    )


def shard_state(state: TrainState, mesh: Mesh) -> TrainState:
    """Place a state on the mesh with the shardings the step is compiled for."""
    return jax.device_put(state, state_shardings(state, mesh))
