"""Non-finite inputs are never hidden by saturation; scales never overflow to inf."""

import chex
import jax.numpy as jnp
import numpy as np
import pytest

from calclip_jax.fp8 import (
    compute_scale,
    dequantize,
    fmt_max,
    init_history,
    quantize,
    quantize_dequantize,
    scale_from_history,
    update_history,
)

FMTS = ("e4m3", "e5m2", "e2m1")
F32_MAX = float(np.finfo(np.float32).max)
# (granularity, options, the [4, 64] elements sharing a scale group with element (1, 3))
GROUPS = {
    "tensor": ({}, (slice(None), slice(None))),
    "channel": ({}, (slice(1, 2), slice(None))),
    "block": ({"block_shape": (2, 16)}, (slice(0, 2), slice(0, 16))),
    "mx": ({}, (slice(1, 2), slice(0, 32))),
}


def _x(seed=0):
    return np.random.default_rng(seed).standard_normal((4, 64)).astype(np.float32)


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("gran", list(GROUPS))
def test_nonfinite_group_dequantizes_to_nan(gran, fmt, bad):
    opts, group = GROUPS[gran]
    x = _x()
    clean = np.asarray(quantize_dequantize(jnp.asarray(x), fmt, gran, **opts))
    x[1, 3] = bad
    qa = quantize(jnp.asarray(x), fmt, gran, **opts)
    out = np.asarray(dequantize(qa))
    in_group = np.zeros(x.shape, bool)
    in_group[group] = True
    assert np.all(np.isnan(out[in_group])), "the overflow must reach the step's finite check"
    np.testing.assert_array_equal(out[~in_group], clean[~in_group])  # other groups untouched
    assert np.isnan(np.asarray(qa.scale)).sum() == 1


@pytest.mark.parametrize("fmt", FMTS)
def test_given_scale_does_not_saturate_nonfinite_input(fmt):
    x = _x(1)
    x[2, 5] = np.inf
    out = np.asarray(quantize_dequantize(jnp.asarray(x), fmt, "tensor", scale=jnp.float32(0.01)))
    assert np.all(np.isnan(out))
    x[2, 5] = 1e30  # finite but far too large for the scale: saturates, stays finite
    out = np.asarray(quantize_dequantize(jnp.asarray(x), fmt, "tensor", scale=jnp.float32(0.01)))
    assert np.all(np.isfinite(out))


class DelayedMarginTest(chex.TestCase):
    """Delayed scaling with a margin at amax > f32 max / 2**margin: finite scale, finite values."""

    @chex.variants(with_jit=True, without_jit=True)
    def test_margin_scale_is_finite(self):
        cases = ((3e38, 1.0, False), (3e38, 1.0, True), (F32_MAX, 12.0, False))
        for fmt in FMTS:
            for amax, margin, pow2 in cases:
                hist = update_history(init_history(4), amax)
                fn = self.variant(
                    lambda h, f=fmt, m=margin, p=pow2: scale_from_history(
                        h, f, margin=m, pow2_scale=p
                    )
                )
                scale = float(fn(hist))
                assert np.isfinite(scale) and scale > 0, (fmt, amax, margin, pow2)
                if not pow2:  # (pow2 scales are capped so that fmt_max * scale is finite)
                    want = min(amax / fmt_max(fmt) * 2.0**margin, F32_MAX)
                    np.testing.assert_allclose(scale, want, rtol=1e-6)

    @chex.variants(with_jit=True, without_jit=True)
    def test_delayed_quantize_near_f32_max_is_finite(self):
        x = jnp.asarray(np.array([[3e38, -3e38, 1e38, 0.0, 1.0]], np.float32))
        hist = update_history(init_history(2), 3e38)
        for fmt in FMTS:
            for pow2 in (False, True):

                @self.variant
                def roundtrip(v, h, f=fmt, p=pow2):
                    s = scale_from_history(h, f, margin=1.0, pow2_scale=p)
                    return quantize_dequantize(v, f, "tensor", scale=s)

                out = np.asarray(roundtrip(x, hist))
                assert np.all(np.isfinite(out)), (fmt, pow2, out)
                np.testing.assert_allclose(out[0, :2], [3e38, -3e38], rtol=0.25)
                out = np.asarray(quantize_dequantize(x, fmt, "tensor", margin=1.0, pow2_scale=pow2))
                assert np.all(np.isfinite(out)), (fmt, pow2, out)


def test_compute_scale_rules():
    amax = jnp.asarray([0.0, 448.0, F32_MAX, jnp.inf, jnp.nan], jnp.float32)
    s = np.asarray(compute_scale(amax, "e4m3", margin=1.0))
    np.testing.assert_allclose(s[:3], [1.0, 2.0, F32_MAX / 224], rtol=1e-6)
    assert np.isnan(s[3]) and np.isnan(s[4])
    assert float(compute_scale(jnp.float32(F32_MAX), "e4m3", margin=12.0)) == F32_MAX  # not inf
    empty = init_history(3)
    assert np.isnan(float(scale_from_history(empty, "e4m3", fallback_amax=jnp.inf)))
