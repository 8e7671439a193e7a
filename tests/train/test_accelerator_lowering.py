"""What a GPU / TPU would compile: the train step and the sampler exported for "cuda" and "tpu"
on this CPU-only machine, every dense GEMM checked for float8 (FP8 presets) or bfloat16 (bf16)
operands, per layer, through the op names of the StableHLO."""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
import re

import jax
import jax.numpy as jnp
import pytest
from train_testutil import TINY, make_setup, prepared

from calclip_jax.analysis.dot_dtypes import exported_text, named_dots
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.fp8.vocabulary import FP8_PRESETS
from calclip_jax.rl.calibration import CalibrationConfig
from calclip_jax.rollout.sampler import _sample_jit
from calclip_jax.train import make_update_step
from calclip_jax.train.update_step import update_flags

MODEL = dataclasses.replace(TINY, n_layers=2, d_ff=160)  # d_ff > 128: several K chunks in down
PROJECTIONS = tuple(MODEL.dense_features())
_DENSE = re.compile(r"layers_(\d+)/(attn/[qkvo]_proj|mlp/\w+_proj)/")
E4M3, E5M2, BF16, F32 = "f8E4M3FN", "f8E5M2", "bf16", "f32"
TOKENS = 8 * 12  # the tokens of `prepared`'s batch: the dW contraction


def _dense_dots(text: str) -> dict[tuple[int, str], collections.Counter]:
    """(layer, projection) -> Counter of (lhs, rhs) operand types of its dot_generals."""
    found: dict[tuple[int, str], collections.Counter] = collections.defaultdict(collections.Counter)
    for lhs, rhs, name in named_dots(text):
        m = _DENSE.search(name)
        if m:
            found[(int(m.group(1)), m.group(2))][(lhs, rhs)] += 1
    return found


def _chunks(granularity: str, k: int) -> int:
    """float8 dots of one GEMM contracting k: one per 128 (block) / 32 (mx) chunk, else one."""
    return math.ceil(k / {"block": 128, "mx": 32}.get(granularity, k))


def _train_step_text(preset: str) -> str:
    calibration = CalibrationConfig(enabled=True)
    cfg, tx, state = make_setup(preset, model=MODEL, calibration=calibration)
    batch = prepared(cfg, state, model=MODEL)
    step = make_update_step(MODEL, cfg, tx)
    return exported_text(step, state, batch, update_flags(False, True))


@pytest.fixture(scope="module", params=["bf16", *FP8_PRESETS])
def train_step(request) -> tuple[str, str]:
    return request.param, _train_step_text(request.param)


def test_every_dense_gemm_of_the_train_step_is_fp8_or_bf16(train_step):
    preset, text = train_step
    dots = _dense_dots(text)
    assert sorted(dots) == [(i, p) for i in range(MODEL.n_layers) for p in sorted(PROJECTIONS)]
    for (layer, proj), types in dots.items():
        where = f"{preset} layer {layer} {proj}: {dict(types)}"
        assert not any(F32 in pair for pair in types), where
        if preset == "bf16":
            assert set(types) == {(BF16, BF16)}, where
            continue
        forward, backward = types[(E4M3, E4M3)], types[(E5M2, E4M3)]
        assert set(types) <= {(E4M3, E4M3), (E5M2, E4M3), (BF16, BF16)}, where
        # One float8 dot per K chunk: forward over d_in, dX over d_out, dW over the tokens.
        d_in, d_out = MODEL.dense_features()[proj]
        chunks = functools.partial(_chunks, FP8_PRESETS[preset][0])
        copies = forward // chunks(d_in)
        assert copies >= 1 and forward == copies * chunks(d_in), where
        assert backward == copies * (chunks(d_out) + chunks(TOKENS)), where


def test_lm_head_and_attention_take_no_float32_operand(train_step):
    _, text = train_step
    other = [(lhs, rhs, name) for lhs, rhs, name in named_dots(text) if not _DENSE.search(name)]
    assert other, "the lm_head and attention dots are in the module"
    head = [d for d in other if "/attn/" not in d[2]]
    assert head and all(d[:2] == (BF16, BF16) for d in head), head


def test_sampler_decode_gemms_are_fp8():
    """Prefill and decode of the sampler (weights pre-quantized once per call)."""
    params = jax.eval_shape(
        lambda: make_setup("fp32", model=MODEL)[2].params,
    )
    prompt = jax.ShapeDtypeStruct((2, 5), jnp.int32)
    for preset in FP8_PRESETS:
        if FP8_PRESETS[preset][1] == "delayed":
            continue  # delayed scaling quantizes in the loop with the trainer's amax history
        fn = jax.jit(
            lambda p, t, m, rng, preset=preset: _sample_jit(
                p,
                None,
                t,
                m,
                rng,
                1,
                0,
                config=MODEL,
                recipe=PrecisionRecipe.preset(preset),
                num_samples=2,
                max_new_tokens=4,
                temperature=1.0,
                top_k=None,
                top_p=1.0,
                use_cache=True,
            )
        )
        text = exported_text(fn, params, prompt, prompt, jax.random.key(0))
        dots = _dense_dots(text)
        assert len(dots) == MODEL.n_layers * len(PROJECTIONS), preset
        for key, types in dots.items():
            assert set(types) == {(E4M3, E4M3)}, (preset, key, dict(types))
