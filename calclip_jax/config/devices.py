"""Whether a run fits the devices: the mesh sizes against the device count and the minibatch
against the data devices, checked before SFT (a misfit otherwise fails after compiling)."""

from __future__ import annotations

import math

from calclip_jax.config.config_dict import ConfigError
from calclip_jax.config.schema import RunConfig

MESH_KEYS = ("mesh.data", "mesh.fsdp", "mesh.tensor")


def mesh_shape(
    data: int | None, fsdp: int | None, tensor: int | None, num_devices: int
) -> tuple[int, int, int]:
    """(data, fsdp, tensor) over `num_devices` devices; one size may be None (the rest)."""
    sizes = [data, fsdp, tensor]
    named = ", ".join(f"{k}={v}" for k, v in zip(MESH_KEYS, sizes, strict=True))
    if sizes.count(None) > 1:
        raise ValueError(f"{named}: at most one of them may be None")
    if any(s is not None and s < 1 for s in sizes):
        raise ValueError(f"{named}: sizes must be >= 1 or None")
    known = math.prod(s for s in sizes if s is not None)
    if None in sizes:
        if num_devices % known:
            raise ValueError(f"{named}: {num_devices} devices are not divisible by {known}")
        sizes[sizes.index(None)] = num_devices // known
    if math.prod(sizes) != num_devices:
        raise ValueError(
            f"{named}: data x fsdp x tensor = {math.prod(sizes)} but {num_devices} devices "
            "are available"
        )
    return sizes[0], sizes[1], sizes[2]


def check_devices(run: RunConfig, num_devices: int) -> tuple[int, int, int]:
    """The run's mesh shape on `num_devices` devices; ConfigError when the mesh does not fit them
    or a minibatch does not split over the data devices (data x fsdp)."""
    m = run.mesh
    try:
        shape = mesh_shape(m.data, m.fsdp, m.tensor, num_devices)
    except ValueError as err:
        raise ConfigError(str(err)) from err
    data_devices = shape[0] * shape[1]
    minibatch = run.rollout.batch_size // run.train.num_minibatches
    if minibatch % data_devices:
        raise ConfigError(
            f"train.num_minibatches={run.train.num_minibatches}: minibatches of {minibatch} "
            f"sequences (rollout.prompts_per_step x rollout.samples_per_prompt / "
            f"num_minibatches) do not split over the {data_devices} data devices "
            f"(mesh.data x mesh.fsdp = {shape[0]} x {shape[1]})"
        )
    micro = run.train.micro_batches
    if (minibatch // micro) % data_devices:
        raise ConfigError(
            f"train.micro_batches={micro}: micro-batches of {minibatch // micro} sequences do "
            f"not split over the {data_devices} data devices "
            f"(mesh.data x mesh.fsdp = {shape[0]} x {shape[1]})"
        )
    return shape
