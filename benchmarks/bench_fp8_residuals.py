"""What the backward keeps per layer, BF16 vs each FP8 preset, at a ~1B-parameter config.

Run: ``python -m benchmarks.bench_fp8_residuals [--model=llama3_1b --tokens=4096]``. Two views,
both from shapes only (nothing of that size is allocated):
- GEMM residuals: the bytes the custom VJP of the seven dense GEMMs of one layer saves (the
  leaves of ``jax.vjp``'s closure, via ``jax.eval_shape``), split into operand values and scales;
- layer residuals: the same for a whole decoder layer (norms, RoPE, SwiGLU, attention included),
  and XLA's compiled scratch memory (``memory_analysis().temp_size_in_bytes``) of one layer's
  forward + backward on this CPU, unless ``--compile=false``.
Ratios are FP8 / BF16 in the same run.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from absl import app, flags

from calclip_jax.fp8 import PrecisionRecipe, fp8_dot_general, matmul_precisions
from calclip_jax.fp8.vocabulary import FP8_PRESETS
from calclip_jax.model import ModelConfig
from calclip_jax.model.transformer import Block

_MODEL = flags.DEFINE_string("model", "llama3_1b", "ModelConfig preset.")
_TOKENS = flags.DEFINE_integer("tokens", 4096, "Tokens per microbatch (batch x sequence).")
_SEQ = flags.DEFINE_integer("seq", 1024, "Sequence length of the whole-layer view.")
_COMPILE = flags.DEFINE_bool("compile", True, "Also compile one layer for XLA's scratch bytes.")

PRESETS = ("bf16", *FP8_PRESETS)


def _residual_leaves(fn, *shapes) -> list[jax.ShapeDtypeStruct]:
    closure = jax.eval_shape(lambda *a: jax.vjp(fn, *a)[1], *shapes)
    return jax.tree_util.tree_leaves(closure)


def _nbytes(leaf) -> int:
    return leaf.size * jnp.dtype(leaf.dtype).itemsize


def gemm_residuals(cfg: ModelConfig, preset: str, tokens: int) -> tuple[int, int]:
    """(operand bytes, scale bytes) the dense GEMMs of one layer keep for the backward."""
    act, wgt, grad = matmul_precisions(PrecisionRecipe.preset(preset), "dense")
    dn = (((1,), (0,)), ((), ()))
    values = scales = 0
    for d_in, d_out in cfg.dense_features().values():
        fn = lambda x, w: fp8_dot_general(
            x,
            w,
            dn,
            lhs_prec=act,
            rhs_prec=wgt,
            grad_prec=_current(grad),
            lhs_scale=None,
            rhs_scale=None,
        )
        x = jax.ShapeDtypeStruct((tokens, d_in), jnp.float32)
        w = jax.ShapeDtypeStruct((d_in, d_out), jnp.float32)
        for leaf in _residual_leaves(fn, x, w):  # float8 / bf16 operands, float32 scales
            if jnp.dtype(leaf.dtype) == jnp.float32:
                scales += _nbytes(leaf)
            else:
                values += _nbytes(leaf)
    return values, scales


def _current(prec):
    """Delayed gradient scaling needs a history argument; per tensor it keeps the same bytes."""
    return dataclasses.replace(prec, scaling="current") if prec.is_delayed else prec


def layer_program(cfg: ModelConfig, preset: str, seq: int):
    """(loss of one decoder layer, its arguments' shapes) for `tokens // seq` rows; the upstream
    gradient, RoPE tables and mask are arguments (constants would be folded by XLA)."""
    block = Block(cfg, PrecisionRecipe.preset(preset))
    batch = max(1, _TOKENS.value // seq)
    x = jax.ShapeDtypeStruct((batch, seq, cfg.d_model), jnp.float32)
    rope = jax.ShapeDtypeStruct((batch, seq, cfg.head_dim), jnp.float32)
    mask = jax.ShapeDtypeStruct((batch, seq, seq), jnp.bool_)
    variables = jax.eval_shape(block.init, jax.random.key(0), x, rope, rope, mask)

    def loss(variables, x, cos, sin, mask, upstream):
        return jnp.sum(block.apply(variables, x, cos, sin, mask)[0] * upstream)

    return loss, (variables, x, rope, rope, mask, x)


def main(argv: list[str]) -> None:
    del argv
    cfg = ModelConfig.preset(_MODEL.value)
    tokens = _TOKENS.value
    print(
        f"model {_MODEL.value}: d_model {cfg.d_model}, d_ff {cfg.d_ff}, {cfg.n_layers} layers; "
        f"{tokens} tokens per microbatch; jax {jax.__version__}"
    )
    rows = {}
    for preset in PRESETS:
        values, scales = gemm_residuals(cfg, preset, tokens)
        loss, args = layer_program(cfg, preset, _SEQ.value)
        layer = sum(_nbytes(leaf) for leaf in _residual_leaves(loss, *args))
        temp = None
        if _COMPILE.value:
            compiled = jax.jit(jax.grad(loss, (0, 1))).lower(*args).compile()
            temp = compiled.memory_analysis().temp_size_in_bytes
        rows[preset] = (values + scales, values, scales, layer, temp)
    base = rows["bf16"]
    mib = lambda b: f"{b / 2**20:9.1f}"
    print(
        "per layer, MiB   | GEMM residuals (values + scales)   x bf16 | whole layer   x bf16 "
        "| compiled fwd+bwd scratch   x bf16"
    )
    for preset, (gemm, values, scales, layer, temp) in rows.items():
        compiled = "" if temp is None else f"| {mib(temp)}   x{temp / base[4]:5.2f}"
        print(
            f"{preset:16s} | {mib(gemm)} ({mib(values)} + {scales / 2**20:6.2f})   "
            f"x{gemm / base[0]:5.2f} | {mib(layer)} x{layer / base[3]:5.2f} {compiled}"
        )


if __name__ == "__main__":
    app.run(main)
