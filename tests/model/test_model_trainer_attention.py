"""The trainer's full-sequence path (dot_product_attention, every recipe) against `attend` on whole
models; the cached path does not use it; the trainer forward exports for CUDA from this CPU
machine."""

from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from model_testutil import TINY, cached_logits, init_params

from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model import attention, forward_logits
from calclip_jax.model.fused_attention import full_sequence_attention

B, T = 3, 10
# logits relative to their largest magnitude: float32 for fp32; bf16 and FP8 round the attention
# output to bfloat16 on both paths, so o_proj's inputs differ by at most one bfloat16 rounding
# (on XLA-CPU they are identical, hence FP8 at float32 level: a differing rounding could move an
# FP8 quantization step)
REL_TOL = {"fp32": 1e-6, "bf16": 2.0**-8, "fp8_block": 1e-6, "fp8_tensor": 1e-6}


@pytest.fixture(scope="module")
def batch():
    tokens = jax.random.randint(jax.random.key(2), (B, T), 1, TINY.vocab_size)
    slot = jnp.arange(T)
    mask = jnp.stack([slot >= 0, slot >= 3, (slot >= 1) & (slot < T - 2)]).astype(jnp.int32)
    return init_params(TINY, seed=3), tokens * mask, mask


def _logits(batch, preset: str, jit: bool) -> np.ndarray:
    params, tokens, mask = batch
    run = functools.partial(forward_logits, TINY, recipe=PrecisionRecipe.preset(preset))
    run = jax.jit(run) if jit else run  # a fresh function: no trace cached across patches
    return np.asarray(run(params, tokens, attn_mask=mask))


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("preset", list(REL_TOL))
def test_trainer_logits_match_attend(batch, monkeypatch, preset, jit):
    new = _logits(batch, preset, jit)
    calls = []

    def attend_instead(q, k, v, mask, dtype):
        calls.append(dtype)
        return attention.attend(q, k, v, mask, dtype)

    monkeypatch.setattr(attention, "full_sequence_attention", attend_instead)
    old = _logits(batch, preset, jit)
    assert len(calls) == TINY.n_layers  # every recipe, fp32 and FP8 included
    real = np.asarray(batch[2], bool)
    err = np.abs(new - old)[real]
    assert err.max() <= REL_TOL[preset] * np.abs(old[real]).max(), (preset, err.max())


def test_cached_path_does_not_use_dot_product_attention(batch, monkeypatch):
    params, tokens, mask = batch
    recipe = PrecisionRecipe.preset("bf16")
    run = lambda: np.asarray(cached_logits(TINY, recipe, params, tokens, mask, prefill=4))
    before = run()

    def forbidden(*args):
        raise AssertionError("the cached path reached full_sequence_attention")

    monkeypatch.setattr(attention, "full_sequence_attention", forbidden)
    np.testing.assert_array_equal(run(), before)


def _exported_calls(fn, *args) -> tuple[list[str], int]:
    exported = jax.export.export(jax.jit(fn), platforms=["cuda"])(*args)
    text = exported.mlir_module()
    return re.findall(r"custom_call @([\w$]+)", text), text.count("stablehlo.dot_general")


def test_trainer_forward_exports_for_cuda_with_plain_dots(batch):
    """Chosen on this CPU backend, attention is XLA's: dot_generals, no cuDNN custom call."""
    params, tokens, mask = batch
    fwd = lambda p, t, m: forward_logits(TINY, p, t, PrecisionRecipe.preset("bf16"), m)
    calls, dots = _exported_calls(fwd, params, tokens, mask)
    assert not [c for c in calls if "cudnn" in c]
    # per layer q, k, v, o, gate, up, down and attention's score and value dots; the lm_head
    assert dots == TINY.n_layers * 9 + 1


def test_cudnn_form_lowers_to_flash_custom_calls(monkeypatch):
    """With cuDNN forced (and its version check faked), the CUDA module holds cuDNN's fused
    attention forward and backward; the fallback for non-contiguous masks stays alongside."""
    fused = pytest.importorskip("jax._src.cudnn.fused_attention_stablehlo")
    monkeypatch.setattr(fused, "cuda_versions", _FakeCudnn(), raising=False)
    q = jax.ShapeDtypeStruct((2, 16, 4, 64), jnp.float32)
    kv = jax.ShapeDtypeStruct((2, 16, 2, 64), jnp.float32)
    mask = jax.ShapeDtypeStruct((2, 16, 16), jnp.bool_)

    def loss(q, k, v, m):
        out = full_sequence_attention(q, k, v, m, jnp.bfloat16, implementation="cudnn")
        return jnp.sum(out**2)

    names = ("__cudnn$fmhaSoftmax", "__cudnn$fmhaSoftmaxBackward")
    checks = [jax.export.DisabledSafetyCheck.custom_call(n) for n in names]
    grad = jax.grad(loss, argnums=(0, 1, 2))
    exported = jax.export.export(jax.jit(grad), platforms=["cuda"], disabled_checks=checks)
    text = exported(q, kv, kv, mask).mlir_module()
    assert set(names) <= set(re.findall(r"custom_call @([\w$]+)", text))
    assert "PADDING_CAUSAL" in text


class _FakeCudnn:
    @staticmethod
    def cudnn_get_version() -> int:
        return 90800
