"""Formats, E8M0 helpers and the precision recipe (validation, presets, round trips)."""

import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from calclip_jax.fp8 import (
    PRESETS,
    PrecisionRecipe,
    TensorPrecision,
    fmt_max,
    from_e8m0,
    mantissa_bits,
    resolve_format,
    round_scale_pow2,
    to_e8m0,
)
from calclip_jax.fp8.vocabulary import FP8_PRESETS


def test_formats():
    assert fmt_max(jnp.float8_e4m3fn) == 448.0
    assert fmt_max("e5m2") == 57344.0
    assert fmt_max("e2m1") == 6.0 and mantissa_bits(jnp.float4_e2m1fn) == 1
    assert resolve_format(jnp.float8_e5m2) == np.dtype(jnp.float8_e5m2)
    with pytest.raises(ValueError):
        resolve_format(jnp.bfloat16)
    with pytest.raises(ValueError):
        resolve_format("e3m4")


def test_e8m0_and_pow2_exact():
    exps = np.arange(-126, 128)
    s = jnp.asarray(2.0**exps, jnp.float32)
    np.testing.assert_array_equal(np.asarray(from_e8m0(to_e8m0(s))), np.asarray(s))
    np.testing.assert_array_equal(np.asarray(to_e8m0(s)), exps + 127)
    # Rounds up to the next power of two; exact powers stay put.
    x = jnp.asarray([1.0, 1.5, 3.0, 0.3, 2.0**-130, 1e38], jnp.float32)
    want = [1.0, 2.0, 4.0, 0.5, 2.0**-126, 2.0**127]
    np.testing.assert_array_equal(np.asarray(round_scale_pow2(x)), np.asarray(want, np.float32))


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"dtype": "fp16"}, "dtype"),
        ({"granularity": "row"}, "granularity"),
        ({"amax_reduce": "mean"}, "amax_reduce"),
        ({"block_shape": (0, 128)}, "block_shape"),
        ({"amax_history_len": 0}, "amax_history_len"),
        ({"pow2_scale": "yes"}, "pow2_scale"),
    ],
)
def test_tensor_precision_validation(kwargs, field):
    with pytest.raises(ValueError, match=field):
        TensorPrecision(**kwargs)


def test_recipe_validation_names_field():
    with pytest.raises(ValueError, match="preset"):
        PrecisionRecipe.preset("fp4")
    with pytest.raises(ValueError, match="granularity"):
        PrecisionRecipe.from_dict({"weights": {"dtype": "e4m3", "granularity": "rows"}})
    with pytest.raises(ValueError, match="unknown"):
        PrecisionRecipe.from_dict({"optimizer": {}})
    with pytest.raises(ValueError, match="weights"):
        PrecisionRecipe(weights="e4m3")


@pytest.mark.parametrize("name", PRESETS)
def test_presets_round_trip(name):
    p = PrecisionRecipe.preset(name)
    assert PrecisionRecipe.from_dict(p.to_dict()) == p
    assert PrecisionRecipe.from_config(ml_collections.ConfigDict(p.to_dict())) == p
    if name.startswith("fp8"):
        assert (p.weights.dtype, p.activations.dtype, p.gradients.dtype) == ("e4m3", "e4m3", "e5m2")
        for prec in (p.weights, p.activations, p.gradients):
            assert (prec.granularity, prec.scaling) == FP8_PRESETS[name]
        assert p.lm_head.dtype == p.kv_cache.dtype == "bf16"
    else:
        assert not p.weights.is_fp8
    assert p.any_delayed == (name == "fp8_delayed")


def test_overrides_and_block_defaults():
    p = PrecisionRecipe.from_dict({"preset": "fp8_block", "gradients": {"dtype": "e4m3"}})
    assert p.gradients == TensorPrecision("e4m3", "block")
    assert p.weights.block_shape_for("weights") == (128, 128)
    assert p.activations.block_shape_for("activations") == (1, 128)
    assert TensorPrecision("e4m3", "block", block_shape=[2, 4]).block_shape == (2, 4)
