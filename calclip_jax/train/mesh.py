"""The one helper that builds the device mesh, and the shardings derived from it."""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

MESH_AXES: tuple[str, str, str] = ("data", "fsdp", "tensor")
BATCH_AXES: tuple[str, str] = ("data", "fsdp")  # the batch dimension is split over both


def make_mesh(
    data: int = -1, fsdp: int = 1, tensor: int = 1, devices: Sequence[jax.Device] | None = None
) -> Mesh:
    """Mesh over (data, fsdp, tensor) with Auto axis types; one axis may be -1 (use the rest)."""
    devices = list(devices if devices is not None else jax.devices())
    sizes = [data, fsdp, tensor]
    if sizes.count(-1) > 1:
        raise ValueError(f"mesh: at most one of data/fsdp/tensor may be -1, got {sizes}")
    known = math.prod(s for s in sizes if s != -1)
    if any(s == 0 or s < -1 for s in sizes):
        raise ValueError(f"mesh: sizes must be positive or -1, got {sizes}")
    if -1 in sizes:
        if len(devices) % known:
            raise ValueError(f"mesh: {len(devices)} devices not divisible by {known}")
        sizes[sizes.index(-1)] = len(devices) // known
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
