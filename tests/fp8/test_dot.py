"""fp8_dot_general: forward and gradients vs float32 within bounds derived from the formats."""

import os
import sys

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calclip_jax.fp8 import TensorPrecision, fp8_dot_general, recipe_dot_general

sys.path.insert(0, os.path.dirname(__file__))
import np_reference as ref

DN = (((1,), (0,)), ((), ()))
GRANS = ["tensor", "channel", "block", "mx"]


def _err(a_ck, fmt, gran, block):
    """Elementwise error bound of a contraction-last operand view [C, K] quantized per ``gran``."""
    opts = {"block_shape": block} if gran == "block" else {}
    g = "channel" if gran == "channel" else gran
    s = ref.expand(ref.scale(a_ck, fmt, g, **opts), a_ck.shape, g, **opts)
    return ref.elem_error_bound(a_ck, s, fmt)


def _matmul_bound(a_mk, b_kn, ea_mk, eb_kn):
    """|a_hat b_hat - a b| <= E_a|b| + |a|E_b + E_a E_b, plus float32 accumulation slack."""
    k = a_mk.shape[1]
    abs_ab = np.abs(a_mk) @ np.abs(b_kn)
    return ea_mk @ np.abs(b_kn) + np.abs(a_mk) @ eb_kn + ea_mk @ eb_kn + 2 * k * 2.0**-24 * abs_ab


def _setup(m, k, n, seed, log_mag=0.0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((m, k)) * 2.0**log_mag).astype(np.float32)
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    c = (rng.standard_normal((m, n)) * 1e-3).astype(np.float32)  # upstream gradient
    return x, w, c


def _check(x, w, c, gran, jit=True):
    p, gp = TensorPrecision("e4m3", gran), TensorPrecision("e5m2", gran)
    wb, ab = (128, 128), (1, 128)

    def f(x, w):
        return fp8_dot_general(x, w, DN, lhs_prec=p, rhs_prec=p, grad_prec=gp)

    fwd = jax.jit(f) if jit else f
    vg = jax.grad(lambda x, w: jnp.sum(f(x, w) * c), (0, 1))
    vg = jax.jit(vg) if jit else vg
    y = np.asarray(fwd(x, w))
    gx, gw = (np.asarray(v) for v in vg(x, w))
    # Scale groups along each GEMM's contraction axis (contraction-last views).
    ex = _err(x, "e4m3", gran, ab)
    ew = _err(w.T, "e4m3", gran, wb).T
    y0 = x.astype(np.float64) @ w
    assert np.all(np.abs(y - y0) <= _matmul_bound(x, w, ex, ew))
    # dX = g W^T (contract over N), dW = X^T g (contract over M): every operand grouped along
    # the contraction of its own GEMM (W along N, X along the tokens M).
    eg_rows = _err(c, "e5m2", gran, ab)  # groups along N
    eg_cols = _err(c.T, "e5m2", gran, ab).T  # groups along M
    ew_rows = _err(w, "e4m3", gran, wb)  # W [K, N] grouped along N
    ex_cols = _err(x.T, "e4m3", gran, ab).T  # X [M, K] grouped along M
    assert np.all(np.abs(gx - c @ w.T) <= _matmul_bound(c, w.T, eg_rows, ew_rows.T))
    assert np.all(np.abs(gw - x.T @ c) <= _matmul_bound(x.T, c, ex_cols.T, eg_cols))
    assert np.max(np.abs(y - y0)) > 0  # really quantized
    return y, gx, gw


@pytest.mark.parametrize("gran", GRANS)
def test_forward_and_grads_within_format_bounds(gran):
    _check(*_setup(6, 160, 40, seed=0), gran)


@settings(max_examples=6, deadline=None)
@given(
    m=st.integers(1, 9),
    k=st.integers(1, 70),
    n=st.integers(1, 9),
    gran=st.sampled_from(GRANS),
    log_mag=st.floats(-12, 12),
    seed=st.integers(0, 1000),
)
def test_property_dot_bounds(m, k, n, gran, log_mag, seed):
    _check(*_setup(m, k, n, seed, log_mag), gran)


class VariantsTest(chex.TestCase):
    @chex.variants(with_jit=True, without_jit=True)
    def test_jit_and_eager_agree(self):
        x, w, c = _setup(4, 64, 8, seed=1)
        p, gp = TensorPrecision("e4m3", "block"), TensorPrecision("e5m2", "block")

        def loss(x, w):
            y = fp8_dot_general(x, w, DN, lhs_prec=p, rhs_prec=p, grad_prec=gp)
            return jnp.sum(y * c), y

        (_, y), grads = self.variant(jax.value_and_grad(loss, (0, 1), has_aux=True))(x, w)
        (_, y_e), grads_e = jax.jit(jax.value_and_grad(loss, (0, 1), has_aux=True))(x, w)
        np.testing.assert_allclose(np.asarray(y), np.asarray(y_e), rtol=1e-6, atol=1e-6)
        for a, b in zip(grads, grads_e, strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-7)


def test_batched_einsum_layout_and_e4m3_grads():
    """Activations [B, T, K] x weights [K, N]; E4M3 gradients; matches per-token scaling."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 48)).astype(np.float32)
    w = rng.standard_normal((48, 5)).astype(np.float32)
    p = TensorPrecision("e4m3", "channel")
    dn = (((2,), (0,)), ((), ()))
    y = fp8_dot_general(x, w, dn, lhs_prec=p, rhs_prec=p, grad_prec=p)
    y2d = fp8_dot_general(x.reshape(6, 48), w, DN, lhs_prec=p, rhs_prec=p, grad_prec=p)
    np.testing.assert_allclose(np.asarray(y).reshape(6, 5), np.asarray(y2d), rtol=1e-6)
    gx = jax.grad(
        lambda x: jnp.sum(fp8_dot_general(x, w, dn, lhs_prec=p, rhs_prec=p, grad_prec=p))
    )(x)
    assert gx.shape == x.shape and gx.dtype == x.dtype


def test_bf16_and_fp32_paths():
    x, w, _ = _setup(4, 32, 8, seed=3)
    f32, b16 = TensorPrecision("fp32"), TensorPrecision("bf16")
    y32 = recipe_dot_general(x, w, DN, f32, f32, f32)
    np.testing.assert_allclose(np.asarray(y32), x @ w, rtol=1e-5, atol=1e-6)
    yb = recipe_dot_general(x, w, DN, b16, b16, b16)
    want = jnp.dot(
        x.astype(jnp.bfloat16), w.astype(jnp.bfloat16), preferred_element_type=jnp.float32
    )
    assert yb.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(yb), np.asarray(want))
    assert not np.array_equal(np.asarray(yb), np.asarray(y32))


def test_per_tensor_pattern_in_jaxpr():
    """Per-tensor path: dot of convert(f8) * scalar operands (the cuBLASLt FP8 GEMM pattern)."""
    x, w, _ = _setup(4, 32, 8, seed=4)
    p = TensorPrecision("e4m3", "tensor")
    text = str(jax.make_jaxpr(lambda a, b: fp8_dot_general(a, b, DN, lhs_prec=p, rhs_prec=p))(x, w))
    assert "f8_e4m3fn" in text and "dot_general" in text
    hlo = jax.jit(lambda a, b: fp8_dot_general(a, b, DN, lhs_prec=p, rhs_prec=p)).lower(x, w)
    assert "f8E4M3FN" in hlo.as_text()
