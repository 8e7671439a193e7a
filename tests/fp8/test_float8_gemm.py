"""The float8 GEMM path of fp8_dot_general against its emulation: the float32 (float64 here) dot
of the same quantized operands, dequantized. Products of FP8 values are exact, so the two differ
only by float32 accumulation and scale rounding; residuals are FP8, and large K runs chunked."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from calclip_jax.analysis.dot_dtypes import dot_operand_types, exported_text
from calclip_jax.fp8 import TensorPrecision, dequantize, fp8_dot_general, quantize
from calclip_jax.fp8.recipe import ACTIVATION_BLOCK, WEIGHT_BLOCK
from calclip_jax.fp8.scaled_gemm import UNROLLED_CHUNKS, _chunked_gemm, _mx_gemm

DN = (((1,), (0,)), ((), ()))
GRANS = ("tensor", "channel", "block", "mx")


def _emulated(view_rk: np.ndarray, fmt, gran: str, block) -> np.ndarray:
    """A [R, K] view quantized along K and dequantized (float64)."""
    opts = {"block_shape": block} if gran == "block" else {}
    qa = quantize(jnp.asarray(view_rk)[None], fmt, gran, axis=-1, **opts)
    return np.asarray(dequantize(qa), np.float64)[0]


def _close(got, want_a, want_b):
    """|got - a b| within float32 accumulation and scaling slack of sum |a||b|."""
    want = want_a @ want_b
    slack = 4 * (want_a.shape[1] + 4) * 2.0**-24 * (np.abs(want_a) @ np.abs(want_b)) + 1e-30
    assert np.all(np.abs(np.asarray(got, np.float64) - want) <= slack)


@pytest.mark.parametrize("gran", GRANS)
@pytest.mark.parametrize("m,k,n", [(5, 48, 7), (40, 300, 24), (130, 1200, 9)])
def test_float8_gemms_equal_the_emulation(gran, m, k, n):
    rng = np.random.default_rng(k + m)
    x = rng.standard_normal((m, k)).astype(np.float32) * 3
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    c = rng.standard_normal((m, n)).astype(np.float32)
    p, gp = TensorPrecision("e4m3", gran), TensorPrecision("e5m2", gran)

    def loss(x, w):
        y = fp8_dot_general(x, w, DN, lhs_prec=p, rhs_prec=p, grad_prec=gp)
        return jnp.sum(y * c), y

    (_, y), (gx, gw) = jax.jit(jax.value_and_grad(loss, (0, 1), has_aux=True))(x, w)
    e4, e5 = jnp.float8_e4m3fn, jnp.float8_e5m2
    act, wgt = ACTIVATION_BLOCK, WEIGHT_BLOCK
    _close(y, _emulated(x, e4, gran, act), _emulated(w.T, e4, gran, wgt).T)
    # dX = g . W^T over N: g and W grouped along N; dW = X^T . g over M: both along M.
    _close(gx, _emulated(c, e5, gran, act), _emulated(w, e4, gran, wgt).T)
    _close(gw, _emulated(x.T, e4, gran, act), _emulated(c.T, e5, gran, act).T)


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
def test_long_contraction_lowers_to_a_loop_of_float8_dots(gran):
    k = 128 * (UNROLLED_CHUNKS + 2)
    x = jax.ShapeDtypeStruct((16, k), jnp.float32)
    w = jax.ShapeDtypeStruct((k, 32), jnp.float32)
    p, gp = TensorPrecision("e4m3", gran), TensorPrecision("e5m2", gran)
    step = jax.value_and_grad(
        lambda x, w: jnp.sum(fp8_dot_general(x, w, DN, lhs_prec=p, rhs_prec=p, grad_prec=gp)),
        (0, 1),
    )
    text = exported_text(step, x, w, platforms=("cuda",))
    types = dot_operand_types(text)
    assert "stablehlo.while" in text
    assert types and all(a.startswith("f8") and b.startswith("f8") for a, b in types), types


@pytest.mark.skipif(
    tuple(int(v) for v in jax.__version__.split(".")[:2]) < (0, 11),
    reason="jax.nn.scaled_matmul has no CPU lowering before jax 0.11",
)
def test_mx_scaled_matmul_equals_chunked_dots():
    """The cuDNN block-scaled GEMM's contract (jax's CPU decomposition) against our chunks."""
    rng = np.random.default_rng(0)
    a = quantize(jnp.asarray(rng.standard_normal((1, 8, 96)), jnp.float32), "e4m3", "mx")
    b = quantize(jnp.asarray(rng.standard_normal((1, 5, 96)), jnp.float32), "e4m3", "mx")
    np.testing.assert_allclose(_mx_gemm(a, b), _chunked_gemm(a, b), rtol=1e-6, atol=1e-6)
