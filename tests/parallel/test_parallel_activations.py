"""`parallel.activations`: constraints fitted to the mesh the inputs carry, identity without one."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from calclip_jax.parallel.activations import BATCH, TENSOR, batch_shards, constrain
from calclip_jax.parallel.mesh import make_mesh

needs8 = pytest.mark.skipif(jax.device_count() < 8, reason="needs 8 (simulated) devices")


def test_identity_without_a_mesh():
    x = jnp.ones((4, 3))
    assert constrain(x, BATCH, TENSOR) is x
    assert batch_shards(x) == 1
    text = jax.jit(lambda x: constrain(x, BATCH) * 2).lower(x).as_text()
    assert "sharding_constraint" not in text and "@Sharding" not in text


def _spec_under(shape, mesh_shape, *spec):
    """The sharding `constrain` gives an array of `shape` placed (replicated) on the mesh."""
    mesh = make_mesh(*mesh_shape)
    x = jax.device_put(np.zeros(shape, np.float32), NamedSharding(mesh, P()))
    return jax.jit(lambda x: constrain(x, *spec))(x).sharding.spec


@needs8
@pytest.mark.parametrize(
    ("shape", "mesh", "spec", "want"),
    [
        ((8, 3), (2, 2, 2), (BATCH, None), P(("data", "fsdp"), None)),
        ((6, 4), (1, 8, 1), (BATCH, TENSOR), P(None, None)),  # 6 rows on 8: whole
        ((6, 4), (2, 4, 1), (BATCH,), P("data")),  # the prefix that divides
        ((8, 4), (1, 4, 2), (BATCH, TENSOR), P("fsdp", "tensor")),  # size-1 data skipped
        ((8, 3), (1, 4, 2), (BATCH, TENSOR), P("fsdp", None)),  # 3 columns on 2: whole
    ],
)
def test_spec_fitted_to_the_shape(shape, mesh, spec, want):
    got = _spec_under(shape, mesh, *spec)
    assert tuple(got) + (None,) * (len(shape) - len(got)) == tuple(want) + (None,) * (
        len(shape) - len(want)
    )


@needs8
def test_mesh_from_the_inputs_or_the_context():
    mesh = make_mesh(2, 2, 2)
    placed = jax.ShapeDtypeStruct((8, 3), jnp.float32, sharding=NamedSharding(mesh, P()))
    plain = jax.ShapeDtypeStruct((8, 3), jnp.float32)
    shards = []
    probe = lambda x: shards.append(batch_shards(x)) or x
    jax.jit(probe).lower(placed)
    jax.jit(probe).lower(plain)
    with jax.set_mesh(mesh):
        jax.jit(lambda x: probe(x) + 0).lower(plain)
    assert shards == [4, 1, 4]
