"""Compiled scratch memory of block and MX GEMMs: the K chunks go one after another into one
float32 accumulator, so XLA's temp allocation stays near one [M, N] float32 partial whatever K
(before, with all chunks in one expression, XLA-CPU kept them all: 2.1x, 4.3x, 8.3x at K = 256,
512, 1024)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax import lax

from calclip_jax.fp8 import TensorPrecision
from calclip_jax.fp8.quantize import QuantizedArray
from calclip_jax.fp8.scaled_gemm import gemm, quantize_view

M = N = 1024
LIMIT = 1.5  # one [M, N] float32 partial, plus the chunks' float32 operands XLA-CPU widens
# (a, b) of each GEMM of fp8_dot_general: (format, role) of its two operands.
GEMMS = {
    "forward": (("e4m3", "activations"), ("e4m3", "weights")),
    "dX": (("e5m2", "gradients"), ("e4m3", "weights")),
    "dW": (("e4m3", "activations"), ("e5m2", "gradients")),
}


def _operand_spec(fmt: str, gran: str, role: str, rows: int, k: int) -> QuantizedArray:
    prec = TensorPrecision(fmt, gran)
    view = jax.ShapeDtypeStruct((1, rows, k), jnp.float32)
    return jax.eval_shape(lambda v: quantize_view(v, prec, role), view)


def gemm_scratch(gran: str, gemm_name: str, k: int) -> float:
    """Temp bytes of the compiled GEMM / bytes of one [M, N] float32 array. The float8 values
    arrive as the quantizer builds them on CPU: integer codes bitcast to float8
    (``fp8/rounding.py``), so that an argument's copy is not counted as the GEMM's."""
    (fa, ra), (fb, rb) = GEMMS[gemm_name]
    specs = _operand_spec(fa, gran, ra, M, k), _operand_spec(fb, gran, rb, N, k)

    def run(a_bits, a_scale, b_bits, b_scale):
        ops = [
            QuantizedArray(
                lax.bitcast_convert_type(bits, spec.values.dtype),
                scale,
                spec.granularity,
                -1,
                spec.block_shape,
            )
            for bits, scale, spec in ((a_bits, a_scale, specs[0]), (b_bits, b_scale, specs[1]))
        ]
        return gemm(*ops)

    args = []
    for spec in specs:
        args += [jax.ShapeDtypeStruct(spec.values.shape, jnp.uint8), spec.scale]
    compiled = jax.jit(run).lower(*args).compile()
    return compiled.memory_analysis().temp_size_in_bytes / (M * N * 4)


@pytest.mark.parametrize("gemm_name", sorted(GEMMS))
@pytest.mark.parametrize("gran", ["block", "mx"])
def test_chunked_gemm_scratch_is_one_partial(gran, gemm_name):
    scratch = {k: gemm_scratch(gran, gemm_name, k) for k in (256, 512, 1024, 4040)}
    assert all(s <= LIMIT for s in scratch.values()), scratch
    assert all(s >= 1.0 for s in scratch.values()), scratch  # a partial is really measured
