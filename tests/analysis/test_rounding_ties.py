"""near_tie_share: random weights at the random rate, a grid aligned with the format all ties."""

import numpy as np
import pytest

from calclip_jax.analysis.rounding_ties import (
    exact_share,
    near_tie_share,
    random_share,
    update_gain,
)
from calclip_jax.fp8.recipe import TensorPrecision

RANDOM = np.random.default_rng(0).normal(0, 0.05, (576, 512)).astype(np.float32)


@pytest.mark.parametrize(
    "prec",
    [TensorPrecision("bf16")] + [TensorPrecision("e4m3", g) for g in ("tensor", "block", "mx")],
)
def test_random_weights_sit_on_boundaries_at_the_random_rate(prec):
    nudge = 1e-4  # ~700 expected hits for E4M3: a stable count
    share = near_tie_share(RANDOM, prec, nudge)
    assert 0.7 * random_share(prec.dtype, nudge) < share < 1.4 * random_share(prec.dtype, nudge)


def test_bf16_midpoints_are_all_ties():
    j = np.arange(128 * 64, dtype=np.float64) % 128
    w = (1.0 + (j + 0.5) * 2.0**-7).reshape(128, 64).astype(np.float32)  # exact in float32
    assert near_tie_share(w, TensorPrecision("bf16")) == 1.0


def test_a_power_of_two_grid_ties_under_mx_but_not_under_a_free_scale():
    rng = np.random.default_rng(1)
    # [K=64, N=32]: E4M3 midpoints of [256, 448) (step 32), and 440 once per 32-block along K,
    # so the MX scale is 2^ceil(log2(440 / 448)) = 1 and the midpoints stay midpoints, while a
    # free scale (440 / 448) moves them off
    w = rng.choice(np.arange(256, 448, 32) + 16, size=(64, 32)).astype(np.float32)
    w[[0, 32]] = 440.0
    assert near_tie_share(w, TensorPrecision("e4m3", "mx")) > 0.9
    for granularity in ("tensor", "channel", "block"):
        assert near_tie_share(w, TensorPrecision("e4m3", granularity)) < 0.1


def test_an_update_nudging_ties_is_amplified_coherently():
    rng = np.random.default_rng(2)
    j = rng.integers(0, 128, (128, 64))
    w0 = (1.0 + (j + 0.5) * 2.0**-7).astype(np.float32)  # every weight on a BF16 tie
    step = rng.choice([-1.0, 1.0], size=w0.shape).astype(np.float32) * 1e-6
    gain, cosine = update_gain(w0, w0 + step, TensorPrecision("bf16"))
    # a tie rounds to even: the half of the weights nudged away from their even neighbour jump a
    # whole BF16 step (0.0078) in the update's direction, the rest stay: cosine 1/sqrt(2)
    assert gain > 1000 and abs(cosine - 2**-0.5) < 0.05
    off = w0 + np.float32(2.0**-9)  # a quarter step off the ties: the same update does nothing
    assert update_gain(off, off + step, TensorPrecision("bf16")) == (0.0, 0.0)
    assert update_gain(w0, w0, TensorPrecision("fp32")) == (0.0, 0.0)


def test_exact_share_finds_an_aligned_grid():
    w = np.random.default_rng(3).integers(1, 16, (64, 32)).astype(np.float32) * 2.0**-6
    assert exact_share(w, TensorPrecision("bf16")) == 1.0
    assert exact_share(w, TensorPrecision("e4m3", "mx")) == 1.0  # 4-bit integers x 2^-6
    assert exact_share(RANDOM, TensorPrecision("e4m3", "mx")) < 0.01
