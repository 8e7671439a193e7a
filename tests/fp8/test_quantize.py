"""quantize / dequantize: scales vs a NumPy reference, round-trip bounds, saturation, zeros."""

import os
import sys

import chex
import hypothesis.extra.numpy as hnp
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calclip_jax.fp8 import dequantize, quantize, quantize_dequantize

sys.path.insert(0, os.path.dirname(__file__))
import np_reference as ref

FMTS = {"e4m3": jnp.float8_e4m3fn, "e5m2": jnp.float8_e5m2, "e2m1": jnp.float4_e2m1fn}
# (granularity, options, input shape): ragged shapes on purpose.
CASES = [
    ("tensor", {}, (5, 7)),
    ("channel", {"axis": -1}, (5, 7)),
    ("channel", {"axis": 0}, (3, 5, 7)),
    ("block", {"block_shape": (4, 8)}, (2, 9, 17)),
    ("block", {"block_shape": (1, 128)}, (3, 300)),
    ("block", {}, (130, 257)),
    ("mx", {}, (4, 70)),
    ("mx", {"axis": 0}, (33, 3)),
]


def _data(shape, seed=0):
    rng = np.random.default_rng(seed)
    # Magnitudes spanning several decades so groups get different scales.
    return (rng.standard_normal(shape) * 10.0 ** rng.uniform(-3, 3, shape)).astype(np.float32)


@pytest.mark.parametrize("fmt", list(FMTS))
@pytest.mark.parametrize("gran, opts, shape", CASES)
def test_scales_match_reference_and_error_bound(fmt, gran, opts, shape):
    x = _data(shape)
    qa = quantize(jnp.asarray(x), FMTS[fmt], gran, **opts)
    s_ref = ref.scale(x, fmt, gran, **opts)
    assert qa.scale.shape == s_ref.shape
    assert qa.values.shape == x.shape and qa.values.dtype == FMTS[fmt]
    np.testing.assert_allclose(np.asarray(qa.scale), s_ref, rtol=2e-7)
    x_hat = np.asarray(dequantize(qa))
    s_full = ref.expand(s_ref, shape, gran, **opts)
    err = np.abs(x_hat - x)
    assert np.all(err <= ref.elem_error_bound(x, s_full, fmt))
    assert np.mean(err) > 0  # it really quantized


def test_scale_shapes_documented():
    x = jnp.ones((6, 300))
    assert quantize(x, FMTS["e4m3"], "tensor").scale.shape == ()
    assert quantize(x, FMTS["e4m3"], "channel", axis=-1).scale.shape == (6, 1)
    assert quantize(x, FMTS["e4m3"], "block").scale.shape == (1, 3)
    assert quantize(x, FMTS["e4m3"], "mx").scale.shape == (6, 10)
    assert quantize(x, FMTS["e4m3"], "mx", axis=0).scale.shape == (1, 300)


def test_group_amax_maps_to_format_max():
    x = jnp.asarray(_data((4, 64)))
    qa = quantize(x, FMTS["e4m3"], "channel")
    row_max = jnp.max(jnp.abs(qa.values.astype(jnp.float32)), axis=-1)
    np.testing.assert_array_equal(np.asarray(row_max), 448.0)


@pytest.mark.parametrize("fmt", list(FMTS))
def test_representable_values_round_trip_exactly(fmt):
    dtype = FMTS[fmt]
    n_codes = 16 if fmt == "e2m1" else 256  # float4 lives in the low nibble of a byte
    codes = np.arange(n_codes, dtype=np.uint8).view(np.dtype(dtype)).astype(np.float32)
    codes = codes[np.isfinite(codes)]
    top = float(ml_dtypes.finfo(np.dtype(dtype)).max)
    for k in (-20, 0, 7):
        x = jnp.asarray(codes * 2.0**k)
        np.testing.assert_array_equal(
            np.asarray(quantize_dequantize(x, dtype, "tensor")), np.asarray(x)
        )
    # Per group: each group holds +-max * 2**k, so its scale is exactly 2**k.
    rng = np.random.default_rng(1)
    x = rng.choice(codes, size=(6, 64)) * 2.0 ** rng.integers(-10, 10, size=(6, 1))
    x[:, ::32] = top * 2.0 ** np.log2(np.abs(x[:, :1]) + 0).round() * 0 + top * (
        2.0 ** rng.integers(-10, 10, size=(6, 1))
    )
    x = x.astype(np.float32)
    for gran, group in (("channel", 64), ("mx", 32)):
        rows = quantize(jnp.asarray(x), dtype, gran)
        exact = (np.asarray(dequantize(rows)) == x).reshape(6, -1, group)
        assert np.all(np.log2(np.asarray(rows.scale)) % 1 == 0)  # scales are powers of two
        # each group's largest element is exact (E2M1's range is too short to promise more)
        at_max = np.abs(x).reshape(6, -1, group).argmax(-1)
        assert np.take_along_axis(exact, at_max[..., None], -1).all()


@pytest.mark.parametrize("fmt", list(FMTS))
def test_saturation_never_nan_or_inf(fmt):
    dtype = FMTS[fmt]
    top = float(ml_dtypes.finfo(np.dtype(dtype)).max)
    big = np.finfo(np.float32).max
    x = jnp.asarray([[big, -big, 1e30, -3.0, 0.0, 1e-30, -1e-45]], jnp.float32)
    # Given (delayed) scale far too small: everything saturates, nothing overflows.
    qa = quantize(x, dtype, "tensor", scale=jnp.float32(1e-5))
    v = np.asarray(qa.values.astype(jnp.float32))
    assert np.all(np.isfinite(v))
    np.testing.assert_array_equal(v[0, :4], [top, -top, top, -top])
    for gran in ("tensor", "channel", "block", "mx"):
        out = np.asarray(quantize_dequantize(x, dtype, gran, block_shape=(1, 4)))
        assert np.all(np.isfinite(out)), gran


@pytest.mark.parametrize("gran", ["tensor", "channel", "block", "mx"])
def test_zero_groups_give_finite_scale_and_zeros(gran):
    x = np.zeros((4, 64), np.float32)
    x[0, :3] = [1.0, -2.0, 3.0]
    qa = quantize(jnp.asarray(x), FMTS["e4m3"], gran, block_shape=(2, 16))
    assert np.all(np.isfinite(np.asarray(qa.scale))) and np.all(np.asarray(qa.scale) > 0)
    out = np.asarray(dequantize(qa))
    np.testing.assert_array_equal(out[1:], 0.0)
    zero = quantize(jnp.zeros((3, 5)), FMTS["e4m3"], gran, block_shape=(2, 2))
    np.testing.assert_array_equal(np.asarray(zero.scale), 1.0)
    np.testing.assert_array_equal(np.asarray(dequantize(zero)), 0.0)


def test_mx_scales_exact_powers_of_two_and_pow2_option():
    x = jnp.asarray(_data((3, 100), seed=3))
    for gran, opts in [
        ("mx", {}),
        ("channel", {"pow2_scale": True}),
        ("tensor", {"pow2_scale": True}),
    ]:
        qa = quantize(x, FMTS["e4m3"], gran, **opts)
        s = np.asarray(qa.scale, np.float64)
        mant, _ = np.frexp(s)
        np.testing.assert_array_equal(mant, 0.5)  # exact powers of two
        amax = ref.group_amax(np.asarray(x), gran)
        assert np.all(amax <= 448.0 * s) and np.all(amax > 224.0 * s)  # rounded up, not more


def test_margin_scales_up():
    x = jnp.asarray(_data((8, 8), seed=4))
    s0 = quantize(x, FMTS["e4m3"], "tensor").scale
    s1 = quantize(x, FMTS["e4m3"], "tensor", margin=1.0).scale
    np.testing.assert_allclose(np.asarray(s1), 2 * np.asarray(s0), rtol=1e-7)
    assert (
        float(
            jnp.max(jnp.abs(quantize(x, FMTS["e4m3"], "tensor", margin=1.0).values.astype(float)))
        )
        == 224.0
    )


def test_bad_arguments():
    with pytest.raises(ValueError, match="granularity"):
        quantize(jnp.ones((2, 2)), FMTS["e4m3"], "row")
    with pytest.raises(ValueError, match="block"):
        quantize(jnp.ones((4,)), FMTS["e4m3"], "block")


class JitVariantsTest(chex.TestCase):
    @chex.variants(with_jit=True, without_jit=True)
    def test_variants_agree(self):
        x = jnp.asarray(_data((6, 40), seed=5))
        for gran in ("tensor", "channel", "block", "mx"):
            fn = self.variant(
                lambda v, g=gran: quantize_dequantize(v, FMTS["e4m3"], g, block_shape=(2, 16))
            )
            want = np.asarray(quantize_dequantize(x, FMTS["e4m3"], gran, block_shape=(2, 16)))
            np.testing.assert_array_equal(np.asarray(fn(x)), want)


@settings(max_examples=15, deadline=None)
@given(
    shape=hnp.array_shapes(min_dims=2, max_dims=3, min_side=1, max_side=40),
    gran=st.sampled_from(["tensor", "channel", "block", "mx"]),
    fmt=st.sampled_from(["e4m3", "e5m2", "e2m1"]),
    log_mag=st.floats(-30, 30),
    block=st.tuples(st.integers(1, 9), st.integers(1, 20)),
    seed=st.integers(0, 2**16),
)
def test_property_round_trip_bound(shape, gran, fmt, log_mag, block, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 2.0**log_mag).astype(np.float32)
    opts = {"block_shape": block} if gran == "block" else {}
    out = np.asarray(jax.jit(lambda v: quantize_dequantize(v, FMTS[fmt], gran, **opts))(x))
    assert out.shape == x.shape and out.dtype == np.float32
    assert np.all(np.isfinite(out))
    s_full = ref.expand(ref.scale(x, fmt, gran, **opts), shape, gran, **opts)
    assert np.all(np.abs(out - x) <= ref.elem_error_bound(x, s_full, fmt))
