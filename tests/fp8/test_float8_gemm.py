"""The float8 GEMM path of fp8_dot_general against its emulation: the float32 (float64 here) dot
of the same quantized operands, dequantized. Products of FP8 values are exact, so the two differ
only by float32 accumulation and scale rounding; residuals are FP8, and large K runs chunked."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gemm_reference import assert_close, emulated

from calclip_jax.analysis.dot_dtypes import dot_operand_types, exported_text
from calclip_jax.fp8 import TensorPrecision, fp8_dot_general
from calclip_jax.fp8.recipe import ACTIVATION_BLOCK, WEIGHT_BLOCK

DN = (((1,), (0,)), ((), ()))
GRANS = ("tensor", "channel", "block", "mx")


@pytest.mark.parametrize("gran", GRANS)
@pytest.mark.parametrize("m,k,n", [(5, 48, 7), (40, 300, 24), (130, 1200, 9)])
def test_float8_gemms_equal_the_emulation(gran, m, k, n):
    _check_gemms(gran, "e4m3", m, k, n)


@pytest.mark.parametrize("gran", GRANS)
def test_e2m1_gemms_equal_the_emulation(gran):
    """4-bit forward operands (the ladder's MXFP4 rung), which XLA-CPU cannot widen itself."""
    _check_gemms(gran, "e2m1", 40, 300, 24)


def _check_gemms(gran: str, fwd: str, m: int, k: int, n: int) -> None:
    """Forward, dX and dW of one jitted fp8_dot_general (forward format ``fwd``, E5M2
    gradients) against the float64 dots of the dequantized operands."""
    rng = np.random.default_rng(k + m)
    x = rng.standard_normal((m, k)).astype(np.float32) * 3
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    c = rng.standard_normal((m, n)).astype(np.float32)
    p, gp = TensorPrecision(fwd, gran), TensorPrecision("e5m2", gran)

    def loss(x, w):
        y = fp8_dot_general(x, w, DN, lhs_prec=p, rhs_prec=p, grad_prec=gp)
        return jnp.sum(y * c), y

    (_, y), (gx, gw) = jax.jit(jax.value_and_grad(loss, (0, 1), has_aux=True))(x, w)
    e5, act, wgt = "e5m2", ACTIVATION_BLOCK, WEIGHT_BLOCK
    assert_close(y, emulated(x, fwd, gran, act), emulated(w.T, fwd, gran, wgt).T)
    # dX = g . W^T over N: g and W grouped along N; dW = X^T . g over M: both along M.
    assert_close(gx, emulated(c, e5, gran, act), emulated(w, fwd, gran, wgt).T)
    assert_close(gw, emulated(x.T, fwd, gran, act), emulated(c.T, e5, gran, act).T)


@pytest.mark.parametrize("preset", ["bf16", *GRANS])
def test_residuals_are_the_quantized_operands(preset):
    """What the backward keeps: float8 values + float32 scales (bf16 copies for bf16), never a
    float32 copy of an operand."""
    x = jnp.ones((64, 256), jnp.float32)
    w = jnp.ones((256, 128), jnp.float32)
    if preset == "bf16":
        p = gp = TensorPrecision("bf16")
    else:
        p, gp = TensorPrecision("e4m3", preset), TensorPrecision("e5m2", preset)
    vjp = jax.vjp(
        lambda x, w: fp8_dot_general(x, w, DN, lhs_prec=p, rhs_prec=p, grad_prec=gp), x, w
    )
    leaves = jax.tree_util.tree_leaves(vjp[1])
    big = [leaf for leaf in leaves if leaf.size >= 64 * 128]
    want = jnp.bfloat16 if preset == "bf16" else jnp.float8_e4m3fn
    assert sorted(leaf.size for leaf in big) == [64 * 256, 128 * 256]
    assert all(leaf.dtype == want for leaf in big), [leaf.dtype for leaf in big]
    f32_bytes = sum(leaf.nbytes for leaf in leaves if leaf.dtype == jnp.float32)
    assert f32_bytes <= (64 + 128) * 256 * 4 // 32 + 64  # scales: at most one per 32 values


@pytest.mark.parametrize("gran", ["block", "mx"])
@pytest.mark.parametrize("k", [256, 128 * 10 + 40])
def test_chunked_contraction_lowers_to_a_loop_of_float8_dots(gran, k):
    """Whatever the chunk count: each of the three GEMMs is one float8 dot in a loop."""
    x = jax.ShapeDtypeStruct((144, k), jnp.float32)  # dW contracts 144 tokens: 2+ chunks
    w = jax.ShapeDtypeStruct((k, 160), jnp.float32)
    p, gp = TensorPrecision("e4m3", gran), TensorPrecision("e5m2", gran)
    step = jax.value_and_grad(
        lambda x, w: jnp.sum(fp8_dot_general(x, w, DN, lhs_prec=p, rhs_prec=p, grad_prec=gp)),
        (0, 1),
    )
    text = exported_text(step, x, w, platforms=("cuda",))
    types = dot_operand_types(text)
    assert text.count("stablehlo.while") == 3
    assert len(types) == 3 and all(a.startswith("f8") and b.startswith("f8") for a, b in types)
