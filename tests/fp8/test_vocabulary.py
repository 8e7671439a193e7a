"""The FP8 vocabulary is the one definition of formats, granularities, scalings, roles, presets."""

import dataclasses
import importlib

import jax.numpy as jnp
import pytest

from calclip_jax import fp8
from calclip_jax.config import spec
from calclip_jax.fp8 import PrecisionRecipe, TensorPrecision, formats, matmul, recipe
from calclip_jax.fp8 import vocabulary as V
from configs import arms

quantize = importlib.import_module("calclip_jax.fp8.quantize")  # fp8.quantize is the function


def test_vocabulary_values():
    assert V.GRANULARITIES == ("tensor", "channel", "block", "mx")
    assert V.SCALINGS == ("current", "delayed")
    assert {
        "e4m3": jnp.float8_e4m3fn,
        "e5m2": jnp.float8_e5m2,
        "e2m1": jnp.float4_e2m1fn,
        "bf16": jnp.bfloat16,
        "fp32": jnp.float32,
    } == V.FORMATS
    assert set(V.SCALED_FORMATS) < set(V.FORMATS)
    assert set(V.OPERAND_ROLES) < set(V.ROLES)
    assert ("fp32", "bf16", *V.FP8_PRESETS) == V.PRESETS
    for granularity, scaling in V.FP8_PRESETS.values():
        assert granularity in V.GRANULARITIES and scaling in V.SCALINGS


def test_every_module_uses_the_vocabulary():
    assert quantize.GRANULARITIES is V.GRANULARITIES
    assert recipe.GRANULARITIES is V.GRANULARITIES and recipe.SCALINGS is V.SCALINGS
    assert recipe.ROLES is V.ROLES and recipe.PRESETS is V.PRESETS is fp8.PRESETS
    assert matmul.MATMUL_ROLES is V.MATMUL_ROLES
    assert fp8.delayed.AMAX_REDUCES is V.AMAX_REDUCES is recipe.AMAX_REDUCES
    assert V.SCALED_FORMATS is spec.FWD_FORMATS
    assert tuple(p.removeprefix("fp8_") for p in V.FP8_PRESETS) == arms.FP8_PRESET_SUFFIXES
    assert [f.name for f in dataclasses.fields(PrecisionRecipe)] == list(V.ROLES)
    for name in V.SCALED_FORMATS:
        assert formats.resolve_format(name) == jnp.dtype(V.FORMATS[name])
    for name in V.FORMATS:
        assert TensorPrecision(name).jnp_dtype is V.FORMATS[name]
        assert TensorPrecision(name).is_fp8 == (name in V.SCALED_FORMATS)


def test_validation_accepts_exactly_the_vocabulary():
    for granularity in V.GRANULARITIES:
        TensorPrecision("e4m3", granularity)
        quantize.quantize(jnp.ones((4, 64)), "e4m3", granularity)
    for bad in ("delayed", "row"):
        with pytest.raises(ValueError, match="granularity"):
            quantize.quantize(jnp.ones((4, 64)), "e4m3", bad)
    with pytest.raises(ValueError, match="scaling"):
        TensorPrecision("e4m3", scaling="history")
    with pytest.raises(ValueError, match="role"):
        matmul.matmul_precisions(PrecisionRecipe(), "attention")
    with pytest.raises(ValueError, match="role"):
        TensorPrecision("e4m3", "block").block_shape_for("kv_cache")
    with pytest.raises(ValueError, match="lhs_role"):
        fp8.fp8_dot_general(
            jnp.ones((2, 4)), jnp.ones((4, 3)), (((1,), (0,)), ((), ())), lhs_role="dense"
        )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"dtype": "e4m3", "granularity": "block", "scaling": "delayed"},
        {"dtype": "e4m3", "granularity": "channel", "scaling": "delayed"},
        {"dtype": "bf16", "scaling": "delayed"},
        {"dtype": "fp32", "scaling": "delayed"},
    ],
)
def test_delayed_scaling_needs_per_tensor_scaled_format(kwargs):
    with pytest.raises(ValueError, match="scaling='delayed' needs granularity='tensor'"):
        TensorPrecision(**kwargs)


def test_delayed_is_a_scaling():
    p = TensorPrecision("e5m2", "tensor", "delayed")
    assert p.is_delayed and not TensorPrecision("e5m2").is_delayed
    assert p.to_dict()["scaling"] == "delayed"
    assert TensorPrecision.from_dict(p.to_dict()) == p
    delayed = PrecisionRecipe.preset("fp8_delayed")
    assert delayed.weights == TensorPrecision("e4m3", "tensor", "delayed")
    assert delayed == dataclasses.replace(
        PrecisionRecipe.preset("fp8_tensor"),
        **{
            r: TensorPrecision(getattr(delayed, r).dtype, "tensor", "delayed")
            for r in V.OPERAND_ROLES
        },
    )
    assert PrecisionRecipe.from_dict(delayed.to_dict()) == delayed


def test_old_delayed_granularity_spelling_is_rejected():
    with pytest.raises(ValueError, match="scaling='delayed'"):
        TensorPrecision.from_dict({"dtype": "e4m3", "granularity": "delayed"})
    with pytest.raises(ValueError, match="scaling='delayed'"):
        TensorPrecision("e4m3", "delayed")
    with pytest.raises(ValueError, match="scaling='delayed'"):
        PrecisionRecipe.from_dict({"preset": "fp8_tensor", "weights": {"granularity": "delayed"}})
