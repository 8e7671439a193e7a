"""The jitted, sharded, state-donating update step and the shardings it is compiled with."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
from jax.sharding import Mesh, NamedSharding

from calclip_jax.model.sharding import param_shardings
from calclip_jax.parallel.mesh import batch_sharding, replicated
from calclip_jax.parallel.multihost import to_global
from calclip_jax.train.state import TrainState


def state_shardings(state: TrainState, mesh: Mesh) -> Any:
    """Params and their optimizer moments by the model's partition rules; the rest replicated."""
    return param_shardings(state, mesh)  # the rules match optimizer moments by path suffix


def batch_shardings(batch: dict[str, Any], mesh: Mesh) -> dict[str, NamedSharding]:
    """Every batch array split over (data, fsdp) along its leading dimension."""
    return {k: batch_sharding(mesh) for k in batch}


@dataclasses.dataclass(frozen=True)
class ShardedStep:
    """The update step jitted for a mesh: `jitted` (a `jax.jit` object: `.lower` it with
    ShapeDtypeStructs to compile without data) and a call that first places host inputs.

    Host (NumPy) batches become global arrays by `to_global`: each process places only the rows
    its own devices hold, so no process checks the others' values (a NaN marks old log-probs
    the first update does not read, and NaN != NaN)."""

    jitted: Any
    batch_shardings: dict[str, NamedSharding]
    flags_sharding: NamedSharding

    def __call__(self, state: TrainState, batch: dict, flags: dict) -> tuple[TrainState, dict]:
        flags_sh = jax.tree.map(lambda _: self.flags_sharding, flags)
        return self.jitted(
            state, to_global(batch, self.batch_shardings), to_global(flags, flags_sh)
        )


def jit_update_step(
    step: Callable, state: TrainState, batch: dict[str, Any], mesh: Mesh
) -> ShardedStep:
    """`jax.jit(step)` with explicit in/out shardings over `mesh` and the state donated; the
    per-update flags (`update_flags`) are replicated scalars."""
    state_sh, batch_sh = state_shardings(state, mesh), batch_shardings(batch, mesh)
    flags_sh = replicated(mesh)
    jitted = jax.jit(
        step,
        in_shardings=(state_sh, batch_sh, flags_sh),
        out_shardings=(state_sh, replicated(mesh)),
        donate_argnums=0,
    )
    return ShardedStep(jitted, batch_sh, flags_sh)


def shard_state(state: TrainState, mesh: Mesh) -> TrainState:
    """Place a state on the mesh with the shardings the step is compiled for."""
    return jax.device_put(state, state_shardings(state, mesh))
