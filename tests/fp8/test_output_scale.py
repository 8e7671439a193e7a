"""Scales meet the GEMM output without a spurious overflow: ``output_scale`` on its own (exact
split, bitwise ``dot * (s_a * s_b)`` in the normal range, inf only where the product is), and
every granularity's forward and backward GEMMs near float32 max against the float64 dot of the
dequantized operands."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gemm_reference import F32_MAX, assert_matches_reference, emulated
from hypothesis import example, given, settings
from hypothesis import strategies as st

from calclip_jax.fp8 import TensorPrecision, fp8_dot_general
from calclip_jax.fp8.output_scale import apply_scales, split_scale
from calclip_jax.fp8.recipe import ACTIVATION_BLOCK, WEIGHT_BLOCK

DN = (((1,), (0,)), ((), ()))
GRANS = ("tensor", "channel", "block", "mx")
TINY = float(np.finfo(np.float32).tiny)
# Scales are normal floats (compute_scale clamps them to >= 2**-126); XLA-CPU flushes subnormals.
normal_f32 = st.floats(min_value=TINY, max_value=F32_MAX, width=32)
# A float8 dot: zero or at least the smallest product of two FP8 values (2**-25).
dots = st.floats(-1e6, 1e6, width=32).filter(lambda d: d == 0 or abs(d) >= 2.0**-25)


@settings(deadline=None)
@given(st.lists(normal_f32, min_size=16, max_size=16))
def test_split_scale_is_exact(scales):
    s = np.asarray(scales, np.float32)
    m, r = (np.asarray(v, np.float64) for v in jax.jit(split_scale)(jnp.asarray(s)))
    np.testing.assert_array_equal(m * r * r, s.astype(np.float64))
    np.testing.assert_array_equal(np.exp2(np.round(np.log2(r))), r)  # powers of two
    assert np.all((m >= 1) & (m < 4))


def test_split_scale_keeps_zero_inf_and_nan():
    m, r = split_scale(jnp.asarray([0.0, np.inf, np.nan], jnp.float32))
    assert m[0] == 0 and m[1] == np.inf and np.isnan(m[2])
    assert np.all(np.isfinite(np.asarray(r)))


@settings(max_examples=200, deadline=None)
@given(dots, normal_f32, normal_f32)
def test_apply_scales(dot, sa, sb):
    """Bitwise ``dot * (sa * sb)`` where that product and the output are normal; else within
    float32 rounding (two roundings; below 2**-126, flushed to zero or not) of the exact product,
    inf exactly where the exact product overflows."""
    got = float(
        jax.jit(lambda d, a, b: apply_scales(d, split_scale(a), split_scale(b)))(
            jnp.float32(dot), jnp.float32(sa), jnp.float32(sb)
        )
    )
    with np.errstate(over="ignore", invalid="ignore"):
        naive = np.float32(dot) * (np.float32(sa) * np.float32(sb))
    exact = float(dot) * float(sa) * float(sb)
    if TINY <= float(sa) * float(sb) <= F32_MAX and TINY <= abs(exact) <= F32_MAX / 2:
        assert got == float(naive)
    if abs(exact) >= F32_MAX * (1 + 2.0**-22):
        assert got == np.sign(exact) * np.inf
    elif abs(exact) <= F32_MAX * (1 - 2.0**-22):
        assert abs(got - exact) <= 2.0**-22 * abs(exact) + TINY


BIG = 1e22
T = BIG / 448 * 2**-9  # the smallest E4M3 step below BIG


@pytest.mark.parametrize("use_jit", [True, False])
@pytest.mark.parametrize("gran", GRANS)
def test_issue_reproducers(gran, use_jit):
    """amax_x * amax_w above float32 max with a finite output (the product of the scales
    overflows), and a large x against a small w (x's scale times the dot overflows)."""
    p, gp = TensorPrecision("e4m3", gran), TensorPrecision("e5m2", gran)
    cases = [
        ([[BIG, T, 0.0]], [[0.0], [T], [BIG]]),  # y = T**2 = 1.901e33
        ([[1e38, 0.0, 0.0]], [[1e-3], [0.0], [0.0]]),  # y = 1e35
    ]
    for x, w in cases:
        x, w = np.asarray(x, np.float32), np.asarray(w, np.float32)
        f = lambda x, w: fp8_dot_general(x, w, DN, lhs_prec=p, rhs_prec=p, grad_prec=gp)
        y = (jax.jit(f) if use_jit else f)(jnp.asarray(x), jnp.asarray(w))
        want_x, want_w = emulated(x, "e4m3", gran), emulated(w.T, "e4m3", gran).T
        assert np.all(np.isfinite(np.asarray(y)))
        assert_matches_reference(y, want_x, want_w)
        if gran != "mx":  # MX's power-of-two scales move T's quantization
            np.testing.assert_allclose(np.asarray(y, np.float64), x @ w.astype(np.float64), 1e-6)
    # The backward GEMM dX = g . w^T meets the same pattern: g = [BIG, T, 0], w = [0, T, BIG].
    x, w = jnp.ones((1, 1)), jnp.asarray([[0.0, T, BIG]])
    f = lambda x, w: fp8_dot_general(x, w, DN, lhs_prec=p, rhs_prec=p, grad_prec=gp)
    g = np.asarray([[BIG, T, 0.0]], np.float32)
    vjp = jax.vjp(jax.jit(f) if use_jit else f, x, w)[1]
    dx = vjp(jnp.asarray(g))[0]
    assert_matches_reference(dx, emulated(g, "e5m2", gran), emulated(np.asarray(w), "e4m3", gran).T)
    assert np.isfinite(float(dx[0, 0])) and float(dx[0, 0]) > 1e32


def _axis_factors(rng: np.random.Generator, size: int, small: int) -> tuple[np.ndarray, ...]:
    """Magnitudes along one contraction axis for its two operands: each index is (1, 0), (0, 1)
    or (2**-small, 2**-small) at random: large entries meet zeros of the other operand (the
    issue's reproducer), the rest meet each other small."""
    kind = rng.integers(0, 3, size)
    low = 2.0**-small
    return np.choose(kind, [1.0, 0.0, low]), np.choose(kind, [0.0, 1.0, low])


def _edge_operands(seed: int, exps: tuple[int, int, int], small: int):
    """x [M, K], w [K, N], g [M, N] = 2**e x (pattern of its rows) x (pattern of its columns) x
    a random sign and mantissa: each GEMM (forward over K, dX over N, dW over M) meets the
    pattern of ``_axis_factors`` along its contraction."""
    rng = np.random.default_rng(seed)
    p_m, t_m = _axis_factors(rng, 130, small)  # x and g along M (dW)
    q_k, r_k = _axis_factors(rng, 160, small)  # x and w along K (forward)
    s_n, u_n = _axis_factors(rng, 130, small)  # w and g along N (dX)

    def operand(rows, cols, e):
        shape = rows.size, cols.size
        noise = rng.choice([-1.0, 1.0], shape) * (1 + rng.integers(0, 8, shape) / 8)
        return (np.ldexp(np.outer(rows, cols) * noise, e) / 2).astype(np.float32)

    return operand(p_m, q_k, exps[0]), operand(r_k, s_n, exps[1]), operand(t_m, u_n, exps[2])


@pytest.mark.parametrize("gran", GRANS)
@settings(max_examples=25, deadline=None)
@given(
    exps=st.tuples(*[st.integers(-60, 127)] * 3),
    small=st.integers(0, 17),
    seed=st.integers(0, 2**32 - 1),
)
@example(exps=(75, 75, 75), small=17, seed=0)  # amax_a x amax_b above 6.9e43, y finite
@example(exps=(125, -20, 125), small=0, seed=0)  # a large operand against a small one
def test_gemms_near_float32_max(gran, exps, small, seed):
    """Forward, dX and dW of 130 x 160 x 130 GEMMs (several block / MX chunks along every
    contraction) with operands up to float32 max: exact where no partial sum overflows, not
    finite where the output overflows (``gemm_reference.assert_matches_reference``)."""
    x, w, g = _edge_operands(seed, exps, small)
    y, dx, dw = _gemms(gran)(x, w, g)
    e4, e5, act, wgt = "e4m3", "e5m2", ACTIVATION_BLOCK, WEIGHT_BLOCK
    assert_matches_reference(y, emulated(x, e4, gran, act), emulated(w.T, e4, gran, wgt).T)
    assert_matches_reference(dx, emulated(g, e5, gran, act), emulated(w, e4, gran, wgt).T)
    assert_matches_reference(dw, emulated(x.T, e4, gran, act), emulated(g.T, e5, gran, act).T)


_JITTED = {}


def _gemms(gran: str):
    """Jitted (x, w, g) -> (y, dX, dW) of fp8_dot_general (one compile per granularity)."""
    if gran not in _JITTED:
        p, gp = TensorPrecision("e4m3", gran), TensorPrecision("e5m2", gran)

        def run(x, w, g):
            f = lambda x, w: fp8_dot_general(x, w, DN, lhs_prec=p, rhs_prec=p, grad_prec=gp)
            y, vjp = jax.vjp(f, x, w)
            return (y, *vjp(g))

        _JITTED[gran] = jax.jit(run)
    return _JITTED[gran]
