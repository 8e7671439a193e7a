"""The batch is never replicated: the sharded update step and forward program of a small model,
compiled for 8 simulated CPU devices, hold no collective whose result spans the global batch.

The programs are compiled from shapes (nothing runs), their inputs placed as `jit_update_step`
places them (state and minibatch committed to the mesh), and their optimized HLO is read
(`parallel.collectives`). Shapes keep the global batch recognizable: B = 48 sequences of T
tokens, model widths powers of two below B * (T - 1), so a result array spans the global batch
iff a dimension is B or at least B * (T - 1) (every token of the batch). T = 11 (without the
activation constraints XLA all-reduces [B * T, F] partial sums there); T = 64 for block scaling,
whose weight-gradient groups are 128 tokens: 6 rows x 64 tokens a device on 8 batch shards are
whole blocks. Local rows (B / shards and its multiples by T, T - 1) mark the Megatron
activation all-reduces over `tensor`; all other all-reduce / reduce-scatter bytes are the
gradients'.
"""

from __future__ import annotations

import collections
import dataclasses
import functools

import jax
import jax.numpy as jnp
import pytest
from train_testutil import TINY, make_setup

from calclip_jax.analysis.dot_dtypes import dot_type_counts
from calclip_jax.parallel.collectives import Collective, collectives
from calclip_jax.parallel.mesh import make_mesh, replicated
from calclip_jax.train.forward import FORWARD_KEYS
from calclip_jax.train.forward_program import make_forward_program
from calclip_jax.train.ppo_update import minibatch_keys
from calclip_jax.train.sharded import batch_shardings, state_shardings
from calclip_jax.train.update_step import make_update_step, update_flags

pytestmark = pytest.mark.skipif(jax.device_count() < 8, reason="needs 8 (simulated) devices")

B = 48
SEQ = {"fp8_block": 64}  # T per preset; 11 for the others
MODEL = dataclasses.replace(TINY, n_layers=2, n_heads=8, n_kv_heads=4, head_dim=8)
MESHES = [(1, 8, 1), (1, 2, 4), (2, 2, 2)]
PRESETS = ["bf16", "fp8_tensor", "fp8_block"]
GRAD_KINDS = ("all-reduce", "reduce-scatter")
INT_KEYS = ("tokens", "positions", "attn_mask", "response_mask")

Shape = tuple[int, int, int]


@dataclasses.dataclass(frozen=True)
class Programs:
    """One preset's programs on one mesh (None: unsharded)."""

    seq: int
    update_hlo: str  # optimized
    update_stablehlo: str  # lowered, before XLA's passes
    forward_hlo: str  # the no-grad forward program (trainer and shadow log-probs)
    param_bytes: int


def _placed(tree, shardings):
    return jax.tree.map(
        lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), tree, shardings
    )


@functools.cache
def programs(preset: str, shape: Shape | None, micro_batches: int = 1, chunk: int | None = None):
    t = SEQ.get(preset, 11)
    kw = {"micro_batches": micro_batches, "logprob_chunk": chunk}
    cfg, tx, state = make_setup(preset, model=MODEL, **kw)
    state = jax.eval_shape(lambda: state)
    batch = {k: jax.ShapeDtypeStruct((B, t), jnp.float32) for k in minibatch_keys(cfg)}
    batch.update({k: jax.ShapeDtypeStruct((B, t), jnp.int32) for k in INT_KEYS})
    batch["advantages"] = jax.ShapeDtypeStruct((B,), jnp.float32)
    flags = jax.eval_shape(lambda: update_flags(False, True))
    if shape is not None:
        mesh = make_mesh(*shape)
        state = _placed(state, state_shardings(state, mesh))
        batch = _placed(batch, batch_shardings(batch, mesh))
        flags = _placed(flags, jax.tree.map(lambda _: replicated(mesh), flags))
    step = jax.jit(make_update_step(MODEL, cfg, tx), donate_argnums=0)
    lowered = step.lower(state, batch, flags)
    program = make_forward_program(MODEL, dataclasses.replace(cfg, same_forward=True))
    rows = {k: batch[k] for k in FORWARD_KEYS}
    forward = program.lower(state.params, state.fp8_meta, rows, shadow=True)
    nbytes = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(state.params))
    return Programs(
        t, lowered.compile().as_text(), lowered.as_text(), forward.compile().as_text(), nbytes
    )


def spanning(found: list[Collective], seq: int, rows: int = B) -> list[Collective]:
    """The collectives with a result array over all `rows` sequences or all their tokens."""
    span = lambda dims: rows in dims or max(dims, default=0) >= rows * (seq - 1)
    return [c for c in found if any(span(dims) for _, dims in c.arrays)]


def traffic(found: list[Collective], shape: Shape, seq: int) -> collections.Counter:
    """All-reduce + reduce-scatter result bytes: "activations" (arrays with a local-rows
    dimension: the Megatron all-reduces over `tensor`) and "gradients" (all the others)."""
    rows = B // (shape[0] * shape[1])
    local = {rows, rows * seq, rows * (seq - 1)}
    out = collections.Counter()
    for c in found:
        for array in c.arrays if c.kind in GRAD_KINDS else ():
            kind = "activations" if local & set(array[1]) else "gradients"
            out[kind] += Collective(c.kind, (array,)).result_bytes
    return out


@pytest.mark.parametrize("shape", MESHES)
@pytest.mark.parametrize("preset", PRESETS)
def test_no_collective_spans_the_global_batch(preset, shape):
    p = programs(preset, shape)
    for name, text in (("update", p.update_hlo), ("forward", p.forward_hlo)):
        found = spanning(collectives(text), p.seq)
        assert not found, f"{name} on {shape}: {found[:4]}"


@pytest.mark.parametrize("shape", MESHES)
@pytest.mark.parametrize("preset", PRESETS)
def test_gradient_traffic_is_about_the_parameters(preset, shape):
    p = programs(preset, shape)
    moved = traffic(collectives(p.update_hlo), shape, p.seq)
    print(f"{preset} {shape}: {dict(moved)} bytes; parameters {p.param_bytes} bytes")
    assert moved["gradients"] <= 2 * p.param_bytes
    if shape[2] == 1:  # no tensor axis: no activation is all-reduced
        assert moved["activations"] == 0


def test_micro_batches_and_logprob_chunks_keep_the_batch_split():
    p = programs("bf16", (1, 8, 1), micro_batches=2, chunk=4)
    for text in (p.update_hlo, p.forward_hlo):  # a micro-batch: B / 2 sequences
        assert not spanning(collectives(text), p.seq, rows=B // 2)


@pytest.mark.parametrize("preset", ["fp8_tensor", "fp8_block"])
def test_sharding_changes_no_gemm_operand_type(preset):
    sharded, single = programs(preset, (2, 2, 2)), programs(preset, None)
    counts = dot_type_counts(single.update_stablehlo)
    assert counts[("f8E4M3FN", "f8E4M3FN")] > 0 and counts[("f8E5M2", "f8E4M3FN")] > 0
    assert dot_type_counts(sharded.update_stablehlo) == counts


def test_no_constraint_without_a_mesh():
    text = programs("bf16", None).update_stablehlo
    assert "sharding_constraint" not in text and "@Sharding" not in text
