"""The one helper that builds the device mesh, and the shardings derived from it."""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

MESH_AXES: tuple[str, str, str] = ("data", "fsdp", "tensor")
BATCH_AXES: tuple[str, str] = ("data", "fsdp")  # the batch dimension is split over both


def make_mesh(
    data: int | None = None,
    fsdp: int | None = 1,
    tensor: int | None = 1,
    devices: Sequence[jax.Device] | None = None,
) -> Mesh:
    """Mesh over (data, fsdp, tensor) with Auto axis types; one size may be None (the rest)."""
    devices = list(devices if devices is not None else jax.devices())
    sizes = [data, fsdp, tensor]
    if sizes.count(None) > 1:
        raise ValueError(f"mesh: at most one of data/fsdp/tensor may be None, got {sizes}")
    if any(s is not None and s < 1 for s in sizes):
        raise ValueError(f"mesh: sizes must be positive or None, got {sizes}")
    known = math.prod(s for s in sizes if s is not None)
    if None in sizes:
        if len(devices) % known:
            raise ValueError(f"mesh: {len(devices)} devices not divisible by {known}")
        sizes[sizes.index(None)] = len(devices) // known
    if math.prod(sizes) != len(devices):
        raise ValueError(
            f"mesh: data*fsdp*tensor = {math.prod(sizes)} but {len(devices)} devices are available"
        )
    return jax.make_mesh(tuple(sizes), MESH_AXES, axis_types=(AxisType.Auto,) * 3, devices=devices)


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Leading (batch) dimension split over data x fsdp, everything else replicated."""
    return NamedSharding(mesh, PartitionSpec(BATCH_AXES))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())
