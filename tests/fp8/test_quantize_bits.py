"""Bit-exact numerics of the fast CPU quantize paths: integer-trick rounding vs ml_dtypes casts,
``quantize`` values vs ``ml_dtypes(clip(x / scale))``, ``quantize_dequantize`` vs
``dequantize(quantize(...))``, jit and non-jit, and the accelerator lowering keeps a native convert.
"""

import os
import re
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
from calclip_jax.fp8.rounding import encode_bits, round_to_grid_bits

sys.path.insert(0, os.path.dirname(__file__))
import np_reference as ref

FMTS = {"e4m3": jnp.float8_e4m3fn, "e5m2": jnp.float8_e5m2, "e2m1": jnp.float4_e2m1fn}
GRANS = {
    "tensor": {},
    "channel": {"axis": 0},
    "block": {"block_shape": (3, 5)},
    "mx": {},
}


def _codes(dtype) -> np.ndarray:
    """All finite values of the format, sorted."""
    n = 16 if dtype == jnp.float4_e2m1fn else 256
    vals = np.arange(n, dtype=np.uint8).view(np.dtype(dtype)).astype(np.float32)
    return np.sort(vals[np.isfinite(vals)])


def _hard_values(dtype) -> np.ndarray:
    """Grid points, exact midpoints (ties) and their float32 neighbours, the edges, specials."""
    codes = _codes(dtype)
    mids = (codes[1:] + codes[:-1]) / 2
    top = codes[-1]
    return np.concatenate(
        [
            codes,
            mids,
            np.nextafter(mids, np.float32(np.inf)),
            np.nextafter(mids, np.float32(-np.inf)),
            [top, -top, np.nextafter(top, np.float32(np.inf)), 0.0, -0.0, 1e-45, -1e-45],
            [np.nan, -np.nan],
        ]
    ).astype(np.float32)


def _bits(a) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype == np.dtype(ml_dtypes.float4_e2m1fn):
        return np.asarray(jax.lax.bitcast_convert_type(jnp.asarray(a), jnp.uint4).astype(jnp.uint8))
    return a.view(np.uint8 if a.dtype.itemsize == 1 else np.uint32)


def _ml_cast(y: np.ndarray, dtype) -> np.ndarray:
    """ml_dtypes cast of clipped float32 ``y``; NaN to float4 is -0 (XLA's convert)."""
    with np.errstate(invalid="ignore"):
        out = np.asarray(y, np.float32).astype(np.dtype(dtype))
    if dtype == jnp.float4_e2m1fn:
        out = np.where(np.isnan(y), np.array(-0.0, np.float32).astype(np.dtype(dtype)), out)
    return out


def _assert_same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
    np.testing.assert_array_equal(_bits(got)[~nan], _bits(want)[~nan])


@pytest.mark.parametrize("fmt", list(FMTS))
def test_integer_rounding_matches_ml_dtypes_and_xla(fmt):
    dtype = FMTS[fmt]
    top = float(ml_dtypes.finfo(dtype).max)
    rng = np.random.default_rng(0)
    random_bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    y = random_bits.view(np.float32)
    y = np.concatenate([y[~(np.abs(y) > top)], _hard_values(dtype)])  # clipped domain, NaN kept
    encode = jax.jit(lambda v: encode_bits(v, np.dtype(dtype)))
    rnd = jax.jit(lambda v: round_to_grid_bits(v, np.dtype(dtype)))
    want = _ml_cast(y, dtype)
    _assert_same_bits(encode(y), want)
    _assert_same_bits(jax.jit(lambda v: v.astype(dtype))(y), want)  # XLA's native convert
    _assert_same_bits(rnd(y), want.astype(np.float32))
    _assert_same_bits(round_to_grid_bits(jnp.asarray(y), np.dtype(dtype)), want.astype(np.float32))


def _check_against_reference(x, fmt, gran, opts):
    dtype = FMTS[fmt]
    top = float(ml_dtypes.finfo(dtype).max)
    qa = quantize(jnp.asarray(x), dtype, gran, **opts)
    scale = np.asarray(qa.scale)
    layout = {k: v for k, v in opts.items() if k in ("axis", "block_shape")}
    s_full = ref.expand(scale, x.shape, gran, **layout)
    with np.errstate(all="ignore"):
        y = np.clip(x / s_full.astype(np.float32), -top, top)
    _assert_same_bits(qa.values, _ml_cast(y, dtype))
    fused = quantize_dequantize(jnp.asarray(x), dtype, gran, **opts)
    _assert_same_bits(fused, dequantize(qa))
    return qa


def _special_array(shape, fmt, seed):
    """Random magnitudes over many decades, with ties, tiny, huge, zeros, -0, NaN/inf spliced in."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 2.0 ** rng.integers(-30, 30, shape)
    hard = _hard_values(FMTS[fmt])
    hard = hard[np.isfinite(hard)] * 2.0 ** rng.integers(-8, 8)
    flat = x.reshape(-1)
    idx = rng.choice(flat.size, size=min(flat.size, hard.size), replace=False)
    flat[idx] = rng.choice(hard, size=idx.size)
    return flat.reshape(shape).astype(np.float32)


@settings(max_examples=40, deadline=None)
@given(
    shape=hnp.array_shapes(min_dims=2, max_dims=3, min_side=1, max_side=45),
    gran=st.sampled_from(list(GRANS)),
    fmt=st.sampled_from(list(FMTS)),
    seed=st.integers(0, 2**16),
    special=st.sampled_from([None, np.inf, -np.inf, np.nan]),
    pow2=st.booleans(),
)
def test_property_values_bit_exact(shape, gran, fmt, seed, special, pow2):
    x = _special_array(shape, fmt, seed)
    if special is not None:
        x.reshape(-1)[seed % x.size] = special
    opts = dict(GRANS[gran], pow2_scale=pow2)
    qa = _check_against_reference(x, fmt, gran, opts)
    if special is not None:  # the group holding the non-finite value dequantizes to NaN
        assert np.isnan(np.asarray(qa.scale)).sum() == 1


@pytest.mark.parametrize("fmt", list(FMTS))
def test_given_pow2_scale_hits_exact_ties(fmt):
    """With scale 2**k every spliced midpoint * 2**k is an exact tie after the division."""
    dtype = FMTS[fmt]
    hard = _hard_values(dtype)
    for k in (-20, 0, 9):
        x = (hard * np.float32(2.0**k)).reshape(1, -1)
        for scale in (jnp.float32(2.0**k), jnp.float32(3 * 2.0**k)):
            _check_against_reference(x, fmt, "tensor", {"scale": scale})


@pytest.mark.parametrize("gran", list(GRANS))
def test_ragged_and_3d_shapes(gran):
    for shape in ((130, 257), (3, 7, 70), (1, 1), (33, 3)):
        for fmt in FMTS:
            _check_against_reference(_special_array(shape, fmt, 7), fmt, gran, GRANS[gran])


def test_channel_last_axis_and_bf16_input():
    x = _special_array((9, 1500), "e4m3", 3)
    _check_against_reference(x, "e4m3", "channel", {"axis": -1})
    xb = jnp.asarray(x).astype(jnp.bfloat16)
    _check_against_reference(np.asarray(xb.astype(jnp.float32)), "e4m3", "tensor", {})
    _assert_same_bits(
        quantize(xb, "e4m3", "mx").values, quantize(xb.astype(jnp.float32), "e4m3", "mx").values
    )


class JitVariantsBitsTest(chex.TestCase):
    @chex.variants(with_jit=True, without_jit=True)
    def test_variants_bit_identical(self):
        x = _special_array((6, 70), "e5m2", 11)
        for gran, opts in GRANS.items():
            for fmt, dtype in FMTS.items():
                q = self.variant(lambda v, g=gran, o=opts, d=dtype: quantize(v, d, g, **o))
                qdq = self.variant(
                    lambda v, g=gran, o=opts, d=dtype: quantize_dequantize(v, d, g, **o)
                )
                want = quantize(jnp.asarray(x), dtype, gran, **opts)
                _assert_same_bits(q(x).values, want.values)
                _assert_same_bits(qdq(x), dequantize(want))
                _check_against_reference(x, fmt, gran, opts)

    def test_compiled_once_per_config(self):
        @chex.assert_max_traces(n=1)
        def fn(v):
            return quantize_dequantize(v, "e4m3", "block", block_shape=(2, 16))

        jitted = jax.jit(fn)
        for seed in range(3):
            jitted(jnp.asarray(_special_array((4, 40), "e4m3", seed)))


def _largest_uint32_tensor(mlir: str) -> int:
    """Element count of the largest ui32 tensor in a StableHLO module (0 if none)."""
    shapes = re.findall(r"tensor<([0-9x]*)xui32>", mlir)
    return max((int(np.prod([int(d) for d in sh.split("x") if d])) for sh in shapes), default=0)


@pytest.mark.parametrize("gran", list(GRANS))
def test_accelerator_export_keeps_native_convert(gran):
    """The CPU bit tricks stay out of the CUDA/TPU module: it converts to float8 natively."""
    x = jnp.ones((64, 256), jnp.float32)
    for fn, name in (
        (lambda v: quantize(v, "e4m3", gran).values, "quantize"),
        (lambda v: quantize_dequantize(v, "e5m2", gran), "qdq"),
    ):
        exported = jax.export.export(jax.jit(fn), platforms=["cuda", "tpu"])(x)
        text = exported.mlir_module()
        assert re.search(r"stablehlo\.convert [^\n]*f8E(4M3FN|5M2)", text), (gran, name)
        assert _largest_uint32_tensor(text) < x.size, (gran, name)  # integer rounding: CPU only
        cpu_text = jax.export.export(jax.jit(fn), platforms=["cpu"])(x).mlir_module()
        assert _largest_uint32_tensor(cpu_text) >= x.size, (gran, name)
        assert not re.search(r"stablehlo\.convert [^\n]*f8E", cpu_text), (gran, name)
