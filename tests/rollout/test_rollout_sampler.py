"""Sampler: shapes, EOS / max length / masks, cache vs recompute, log-probs vs trainer forward."""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import traverse_util
from rollout_testutil import FWD, TINY, init_params, prompts

from calclip_jax.fp8 import PrecisionRecipe, TensorPrecision
from calclip_jax.fp8.prequantized import PREQUANTIZED
from calclip_jax.model import Transformer, token_logprobs_and_entropy
from calclip_jax.rollout import filter_logits, sample, sync_weights

B, G, P, N = 2, 3, 5, 6
NO_EOS = -1


@pytest.fixture(scope="module")
def params():
    return init_params(seed=3)


def _run(params, recipe, eos=NO_EOS, **kw):
    tokens, mask = prompts(B, P)
    options = dict(num_samples=G, max_new_tokens=N, eos_id=eos, pad_id=0, temperature=1.0)
    return sample(params, TINY, recipe, tokens, mask, jax.random.key(7), **(options | kw))


def _trainer_logp(params, recipe, batch):
    logits = FWD(TINY, params, batch.tokens, recipe, batch.attn_mask)
    return token_logprobs_and_entropy(logits, batch.tokens, batch.response_mask)[0]


def test_shapes_lengths_and_logp_match_trainer_fp32(params):
    pol = PrecisionRecipe.preset("fp32")
    out = _run(params, pol, top_k=8, top_p=0.9)
    for x in (out.tokens, out.attn_mask, out.positions, out.response_mask, out.rollout_logp):
        chex.assert_shape(x, (B * G, P + N))
    chex.assert_shape(out.response_len, (B * G,))
    np.testing.assert_array_equal(out.response_len, N)  # no EOS: max length
    np.testing.assert_array_equal(out.response_mask[:, P:], 1)
    np.testing.assert_array_equal(out.response_mask[:, :P], 0)
    tokens, mask = prompts(B, P)
    np.testing.assert_array_equal(out.tokens[:, :P], np.repeat(tokens, G, axis=0))
    np.testing.assert_array_equal(out.attn_mask[:, :P], np.repeat(mask, G, axis=0))
    assert len({tuple(r) for r in np.asarray(out.tokens[:G, P:])}) > 1  # G distinct samples
    # rollout log-probs are of the truncated (top-k 8, top-p 0.9) distribution sampled from
    logits = FWD(TINY, params, out.tokens, pol, out.attn_mask)[:, P - 1 : -1]
    kept = filter_logits(logits.reshape(-1, logits.shape[-1]), 8, 0.9).reshape(logits.shape)
    picked = jnp.take_along_axis(jax.nn.log_softmax(kept, -1), out.tokens[:, P:, None], -1)
    np.testing.assert_allclose(out.rollout_logp[:, P:], picked[..., 0], atol=1e-4)
    trainer = _trainer_logp(params, pol, out)  # untruncated: each kept token is likelier there
    assert np.all(np.asarray(out.rollout_logp - trainer)[:, P:] >= -1e-5)
    assert float(jnp.max(out.rollout_logp)) <= 0.0 and float(jnp.min(out.rollout_logp)) < -0.01
    # top-k 8: every sampled token is among the 8 most likely under the (identical) logits
    rank = jnp.sum(logits > jnp.take_along_axis(logits, out.tokens[:, P:, None], -1), -1)
    assert int(rank.max()) < 8

    # EOS: re-run with the token row 0 drew at step 2 as EOS; same key, same draws before it
    eos = int(out.tokens[0, P + 2])
    stop = _run(params, pol, eos=eos, top_k=8, top_p=0.9)
    resp = np.asarray(out.tokens[:, P:])
    first = np.where((resp == eos).any(1), (resp == eos).argmax(1) + 1, N)
    np.testing.assert_array_equal(stop.response_len, first)
    assert int(stop.response_len[0]) <= 3
    for i, n in enumerate(first):
        np.testing.assert_array_equal(stop.tokens[i, : P + n], out.tokens[i, : P + n])
        np.testing.assert_array_equal(stop.tokens[i, P + n :], 0)  # pad after EOS
        np.testing.assert_array_equal(stop.response_mask[i, P + n :], 0)
        np.testing.assert_array_equal(stop.rollout_logp[i, P + n :], 0.0)


def _fp8_kv(preset: str) -> PrecisionRecipe:
    return dataclasses.replace(PrecisionRecipe.preset(preset), kv_cache=TensorPrecision("e4m3"))


@pytest.mark.parametrize("recipe", [PrecisionRecipe.preset("bf16"), _fp8_kv("fp8_block")])
def test_greedy_cache_equals_recompute_and_trainer(params, recipe):
    cached = _run(params, recipe, temperature=0.0)
    full = _run(params, recipe, temperature=0.0, use_cache=False)
    np.testing.assert_array_equal(cached.tokens, full.tokens)
    np.testing.assert_allclose(cached.rollout_logp, full.rollout_logp, atol=2e-3)
    np.testing.assert_allclose(
        cached.rollout_logp, _trainer_logp(params, recipe, cached), atol=2e-3
    )


def test_weight_sync_is_exact():
    """FP8 kernels become float8 GEMM operands, applied as the trainer's forward applies them."""
    params = init_params(seed=4)
    tokens, mask = prompts(B, P)
    positions = jnp.maximum(jnp.cumsum(mask, axis=1) - 1, 0)
    for preset in ("fp8_tensor", "fp8_channel", "fp8_block", "fp8_mx"):
        pol = PrecisionRecipe.preset(preset)
        synced = sync_weights(params, pol)
        up = synced[PREQUANTIZED]["layers_0"]["mlp"]["up_proj"]["kernel"]
        assert up.values.dtype == jnp.float8_e4m3fn
        kept = traverse_util.flatten_dict(synced["params"])
        assert not [k for k in kept if k[-1] == "kernel"]  # every dense kernel moved
        apply = jax.jit(Transformer(TINY, pol).apply)
        np.testing.assert_array_equal(
            apply(synced, tokens, positions, mask)[0],
            FWD(TINY, params, tokens, pol, mask),
        )
    synced = sync_weights(params, PrecisionRecipe.preset("bf16"))["params"]
    assert synced["layers_0"]["attn"]["q_proj"]["kernel"].dtype == jnp.bfloat16
    assert synced["embed"]["embedding"].dtype == jnp.float32


def test_delayed_policy_needs_fp8_meta(params):
    with pytest.raises(ValueError, match="fp8_meta"):
        _run(params, PrecisionRecipe.preset("fp8_delayed"))
