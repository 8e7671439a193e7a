"""What a GPU / TPU would compile: the train step and the sampler exported for "cuda" and "tpu"
on this CPU-only machine, every dense GEMM checked for float8 (FP8 presets) or bfloat16 (bf16)
operands, per layer, through the op names of the StableHLO; attention's dots for bfloat16
operands (float32 at HIGHEST for fp32), on the whole-sequence path and on the shared-prompt
path, and the train forward's residuals for no saved scores."""

from __future__ import annotations

import collections
import dataclasses
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from train_testutil import TINY, make_setup, prepared, rollout_batch

from calclip_jax.analysis.dot_dtypes import exported_text, named_dots
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.fp8.vocabulary import FP8_PRESETS
from calclip_jax.model.shared_prompt import PromptGroups
from calclip_jax.rl.calibration import CalibrationConfig
from calclip_jax.rollout.sampler import _sample_jit
from calclip_jax.train import PPOUpdater, make_update_step
from calclip_jax.train.forward import batch_logprobs
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
    """float8 dots of one GEMM contracting k: one (block / MX: one dot in a loop over K chunks)."""
    return 1


def _train_step_text(preset: str, calibrate: bool = True) -> str:
    calibration = CalibrationConfig(enabled=calibrate)
    cfg, tx, state = make_setup(preset, model=MODEL, calibration=calibration)
    batch = prepared(cfg, state, model=MODEL, calibrate=calibrate)
    step = make_update_step(MODEL, cfg, tx)
    return exported_text(step, state, batch, update_flags(False, calibrate))


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


_DOT_LINE = re.compile(r"stablehlo\.dot_general\b[^\n]*")
_BF16_ALGORITHM = "lhs_precision_type = bf16, rhs_precision_type = bf16, accumulation_type = f32"


def _attention_dots(text: str) -> list[tuple[str, str, bool]]:
    """(lhs, rhs, declares the bf16 x bf16 -> f32 algorithm) of every attention dot_general."""
    lines = _DOT_LINE.findall(text)
    named = named_dots(text)
    assert len(lines) == len(named)  # one named dot per dot_general line, in program order
    return [
        (lhs, rhs, _BF16_ALGORITHM in line)
        for (lhs, rhs, name), line in zip(named, lines, strict=True)
        if "/attn/" in name and not _DENSE.search(name)
    ]


def test_attention_dots_take_bfloat16_operands(train_step):
    """Forward and backward: bf16 x bf16, or an f32 cotangent under the bf16 x bf16 -> f32
    algorithm (the accelerator rounds it to bf16); never f32 x f32."""
    preset, text = train_step
    dots = _attention_dots(text)
    # per layer: forward scores and values, the scores recomputed, 4 backward dots (each of
    # the 7 once per exported platform or once; at least 7 per layer)
    assert len(dots) >= 7 * MODEL.n_layers, (preset, len(dots))
    for lhs, rhs, bf16_algorithm in dots:
        assert (lhs, rhs) != (F32, F32), preset
        assert (lhs, rhs) == (BF16, BF16) or bf16_algorithm, (preset, lhs, rhs)


def _shared_prompt_step_text(preset: str, calibrate: bool = True) -> str:
    """The train step of `train.share_prompt` (groups of 2 rows sharing a 4-token prompt), whose
    attention is the cached path's (`attend_cached`), exported as `_train_step_text`."""
    groups = PromptGroups(2, 8)
    calibration = CalibrationConfig(enabled=calibrate)
    cfg, tx, state = make_setup(preset, model=MODEL, calibration=calibration, shared_prompt=groups)
    updater = PPOUpdater(MODEL, cfg, None, num_minibatches=1, ref_params=state.params)
    rollout = rollout_batch(batch=8, prompt=4, response=8, seed=0, group=2)
    batch = updater.prepare(state, rollout, [np.arange(8)], calibrate)[0]
    step = make_update_step(MODEL, cfg, tx)
    return exported_text(step, state, batch, update_flags(False, calibrate))


SHARED_PRESETS = ["bf16", *(p for p, (_, scaling) in FP8_PRESETS.items() if scaling != "delayed")]


@pytest.mark.parametrize("preset", SHARED_PRESETS)
def test_shared_prompt_attention_dots_take_bfloat16_operands(preset):
    """The shared-prompt forward's attention (prompt pass and response pass, forward, the
    rematerialized scores and the backward) as the main path's: bf16 x bf16 dots or an f32
    cotangent under the bf16 x bf16 -> f32 algorithm; never f32 x f32."""
    dots = _attention_dots(_shared_prompt_step_text(preset))
    # per layer and pass (prompt, response): 2 forward, 2 recomputed and 4 backward dots
    assert len(dots) >= 2 * 7 * MODEL.n_layers, (preset, len(dots))
    for lhs, rhs, bf16_algorithm in dots:
        assert (lhs, rhs) != (F32, F32), preset
        assert (lhs, rhs) == (BF16, BF16) or bf16_algorithm, (preset, lhs, rhs)


def test_shared_prompt_fp32_attention_is_float32_at_highest_precision():
    """The fp32 recipe's shared-prompt attention keeps float32 operands at HIGHEST."""
    text = _shared_prompt_step_text("fp32", calibrate=False)
    dots = _attention_dots(text)
    assert len(dots) >= 2 * 7 * MODEL.n_layers
    assert all(d[:2] == (F32, F32) for d in dots), dots
    assert len([line for line in _DOT_LINE.findall(text) if "HIGHEST" in line]) >= len(dots)


def test_fp32_attention_is_float32_at_highest_precision():
    """The fp32 recipe (the float64-referenced baseline) keeps float32 operands, no TF32 (no
    calibration: its BF16 shadow forward would add bfloat16 attention)."""
    text = _train_step_text("fp32", calibrate=False)
    dots = _attention_dots(text)
    assert len(dots) >= 7 * MODEL.n_layers
    assert all(d[:2] == (F32, F32) for d in dots), dots
    lines = [line for line in _DOT_LINE.findall(text) if "HIGHEST" in line]
    assert len(lines) >= len(dots)


@pytest.mark.parametrize("preset", ["fp32", "bf16", *FP8_PRESETS])
def test_train_forward_saves_no_attention_scores(preset):
    """The residuals the train step's forward (`batch_logprobs`) keeps for its backward hold no
    [..., T, S] array of scores or probabilities: attention saves q, k, v only."""
    cfg, _, state = make_setup(preset, model=MODEL)
    batch = prepared(cfg, state, model=MODEL, calibrate=False)
    t = batch["tokens"].shape[1]

    def logp(params):
        return batch_logprobs(MODEL, cfg.recipe, params, state.fp8_meta, batch)[0]

    leaves = jax.eval_shape(lambda p: jax.tree.leaves(jax.vjp(logp, p)[1]), state.params)
    scores = [
        x
        for x in leaves
        if x.ndim >= 4 and x.shape[-1] == t and jnp.issubdtype(x.dtype, jnp.floating)
    ]
    assert leaves and not scores, (preset, [(x.shape, x.dtype) for x in scores])


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
