"""The float32 sampler's fused gate/up GEMM (`mlp.fuse_gate_up`, applied by weight sync): the
same MLP as the two GEMMs within float32's rounding bound, jit and not, and a tensor-parallel
split of its kernel needs no communication before down_proj."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import traverse_util
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from model_testutil import TINY, init_params, variant

from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model.mlp import GATE_UP, MLP, fuse_gate_up
from calclip_jax.model.sharding import param_shardings, param_specs
from calclip_jax.rollout import sync_weights
from calclip_jax.train import make_mesh

FP32 = PrecisionRecipe.preset("fp32")
U = 2.0**-24


def _gamma(n: int) -> float:
    return n * U / (1 - n * U)


def _mlp_params(d: int, f: int, seed: int) -> dict:
    keys = jax.random.split(jax.random.key(seed), 3)
    shapes = {"gate_proj": (d, f), "up_proj": (d, f), "down_proj": (f, d)}
    return {
        name: {"kernel": jax.random.normal(key, shape) / np.sqrt(shape[0])}
        for key, (name, shape) in zip(keys, shapes.items(), strict=True)
    }


def _bound(x, params) -> np.ndarray:
    """|float32 MLP - exact| per output element, from the format: each gate / up element is a
    D-term dot (error <= gamma_D sum |x w|); silu' <= 1.1 and the product add u |silu(g) u| of
    rounding; down_proj sums F terms (gamma_F sum |h w|) of inputs off by the above."""
    x = np.asarray(x, np.float64)
    w = {k: np.asarray(v["kernel"], np.float64) for k, v in params.items()}
    d, f = w["gate_proj"].shape
    g, u = x @ w["gate_proj"], x @ w["up_proj"]
    dg, du = (_gamma(d) * (np.abs(x) @ np.abs(w[k])) for k in ("gate_proj", "up_proj"))
    silu = g / (1 + np.exp(-g))
    h = silu * u
    dh = 1.1 * dg * (np.abs(u) + du) + np.abs(silu) * du + 4 * U * np.abs(h)
    return (np.abs(h) + dh) @ np.abs(w["down_proj"]) * _gamma(f) + dh @ np.abs(w["down_proj"])


def _exact(x, params) -> np.ndarray:
    x = np.asarray(x, np.float64)
    w = {k: np.asarray(v["kernel"], np.float64) for k, v in params.items()}
    g, u = x @ w["gate_proj"], x @ w["up_proj"]
    return (g / (1 + np.exp(-g)) * u) @ w["down_proj"]


@settings(max_examples=8, deadline=None)
@given(
    rows=st.integers(1, 80),
    d=st.sampled_from([8, 32, 128]),
    f=st.sampled_from([16, 48, 384]),
    seed=st.integers(0, 2**16),
)
def test_fused_gate_up_is_the_two_gemms_within_rounding(rows, d, f, seed):
    config = variant(TINY, d_model=d, d_ff=f)
    params = _mlp_params(d, f, seed)
    x = jax.random.normal(jax.random.key(seed + 1), (rows, 1, d)) * 2
    exact, bound = _exact(x, params), _bound(x, params)
    apply = MLP(config, FP32).apply
    two = np.asarray(jax.jit(apply)({"params": params}, x))
    assert np.all(np.abs(two - exact) <= bound)
    fused = {"params": fuse_gate_up({"mlp": params})["mlp"]}
    assert set(fused["params"]) == {GATE_UP, "down_proj"}
    for run in (apply, jax.jit(apply)):
        got = np.asarray(run(fused, x))
        assert np.all(np.abs(got - exact) <= bound)
        assert np.all(np.abs(got - two) <= 2 * bound)


def test_fuse_gate_up_interleaves_the_columns_and_keeps_the_rest():
    params = init_params(TINY)
    fused = fuse_gate_up(params)
    flat, fused_flat = (traverse_util.flatten_dict(p) for p in (params, fused))
    for i in range(TINY.n_layers):
        mlp = params[f"layers_{i}"]["mlp"]
        kernel = np.asarray(fused[f"layers_{i}"]["mlp"][GATE_UP]["kernel"])
        assert kernel.shape == (TINY.d_model, 2 * TINY.d_ff)
        np.testing.assert_array_equal(kernel[:, 0::2], mlp["gate_proj"]["kernel"])
        np.testing.assert_array_equal(kernel[:, 1::2], mlp["up_proj"]["kernel"])
    gone = {k for k in flat if k[-2] in ("gate_proj", "up_proj")}
    assert len(gone) == 2 * TINY.n_layers and not gone & set(fused_flat)
    assert all(fused_flat[k] is v for k, v in flat.items() if k not in gone)


def test_weight_sync_fuses_only_float32_gemms():
    params = init_params(TINY)
    for preset, fuses in (("fp32", True), ("bf16", False), ("fp8_tensor", False)):
        synced = sync_weights(params, PrecisionRecipe.preset(preset))
        kernels = {k[-2] for k in traverse_util.flatten_dict(synced) if k[2:3] == ("mlp",)}
        assert (GATE_UP in kernels) == fuses and ("up_proj" in kernels) != fuses, preset


def test_tensor_parallel_fused_kernel_needs_no_communication_before_down_proj():
    """Column-parallel gate/up (`sharding`): with gate and up columns interleaved, each tensor
    shard holds both halves of its own F slice, so the fused GEMM and silu(gate) * up stay
    local; the only collective is down_proj's (row-parallel) reduction."""
    d, f, tensor = 32, 64, 4
    params = fuse_gate_up({"mlp": _mlp_params(d, f, 0)})["mlp"]
    assert param_specs({"mlp": params})["mlp"][GATE_UP]["kernel"] == P("fsdp", "tensor")
    mesh = make_mesh(1, 1, tensor, devices=jax.devices()[:tensor])
    placed = jax.device_put({"mlp": params}, param_shardings({"mlp": params}, mesh))["mlp"]
    x = jax.device_put(jnp.ones((8, 1, d)), NamedSharding(mesh, P()))
    config = variant(TINY, d_model=d, d_ff=f)
    hlo = jax.jit(MLP(config, FP32).apply).lower({"params": placed}, x).compile().as_text()
    ops = ("all-gather", "all-to-all", "collective-permute")
    assert not [op for op in ops if op in hlo], [op for op in ops if op in hlo]
    assert "all-reduce" in hlo or "reduce-scatter" in hlo
