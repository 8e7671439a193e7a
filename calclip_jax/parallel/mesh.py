"""The one helper that builds the device mesh, and the shardings derived from it."""

from __future__ import annotations

from collections.abc import Sequence

import jax
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

from calclip_jax.config.devices import mesh_shape

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
    sizes = mesh_shape(data, fsdp, tensor, len(devices))
    return jax.make_mesh(sizes, MESH_AXES, axis_types=(AxisType.Auto,) * 3, devices=devices)


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Leading (batch) dimension split over data x fsdp, everything else replicated."""
    return NamedSharding(mesh, PartitionSpec(BATCH_AXES))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())
