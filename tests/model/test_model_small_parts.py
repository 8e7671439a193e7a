"""Config, log-probs/entropy against NumPy, and partition rules."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P
from model_testutil import TINY, init_params, variant

from calclip_jax.model import ModelConfig, param_shardings, param_specs, token_logprobs_and_entropy


def test_config_presets_roundtrip_and_errors():
    for name in ("tiny", "small", "llama3_1b", "llama3_8b", "qwen2_7b", "qwen3_8b"):
        cfg = ModelConfig.preset(name)
        assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert ModelConfig.preset("qwen3_8b").qk_norm and ModelConfig.preset("qwen2_7b").attention_bias
    with pytest.raises(ValueError, match="preset"):
        ModelConfig.preset("gpt5")
    with pytest.raises(ValueError, match="bogus"):
        ModelConfig.from_dict({**TINY.to_dict(), "bogus": 1})
    with pytest.raises(ValueError, match="n_kv_heads"):
        variant(TINY, n_kv_heads=3)


class LogprobTest(chex.TestCase):
    @chex.variants(with_jit=True, without_jit=True)
    def test_matches_numpy(self):
        rng = np.random.default_rng(0)
        logits = rng.normal(size=(2, 5, 7)).astype(np.float32) * 3
        tokens = rng.integers(0, 7, size=(2, 5))
        mask = np.array([[0, 0, 1, 1, 1], [0, 1, 1, 1, 0]], np.int32)
        logp, ent = self.variant(token_logprobs_and_entropy)(logits, tokens, mask)
        chex.assert_shape([logp, ent], (2, 5))
        chex.assert_type([logp, ent], jnp.float32)
        logz = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        ref_lp = np.zeros((2, 5), np.float32)
        ref_lp[:, 1:] = np.take_along_axis(logz[:, :-1], tokens[:, 1:, None], -1)[..., 0]
        ref_ent = np.zeros((2, 5), np.float32)
        ref_ent[:, 1:] = -(np.exp(logz) * logz).sum(-1)[:, :-1]
        np.testing.assert_allclose(logp, ref_lp * mask, atol=1e-5)
        np.testing.assert_allclose(ent, ref_ent * mask, atol=1e-5)
        assert float(logp[0, 0]) == 0.0 and float(ent[1, 4]) == 0.0


def test_partition_specs():
    params = init_params(variant(TINY, tie_embeddings=False, attention_bias=True, qk_norm=True))
    specs = param_specs(params)
    layer = specs["layers_0"]
    assert specs["embed"]["embedding"] == P("tensor", "fsdp")
    assert layer["attn"]["q_proj"]["kernel"] == P("fsdp", "tensor")
    assert layer["attn"]["k_proj"]["bias"] == P("tensor")
    assert layer["attn"]["o_proj"]["kernel"] == P("tensor", "fsdp")
    assert layer["mlp"]["down_proj"]["kernel"] == P("tensor", "fsdp")
    assert layer["attn"]["q_norm"]["scale"] == P() and specs["final_norm"]["scale"] == P()
    assert specs["lm_head"]["kernel"] == P("fsdp", "tensor")
    mesh = jax.make_mesh((1, 1, 1), ("data", "fsdp", "tensor"))
    placed = jax.device_put(params, param_shardings(params, mesh))
    chex.assert_trees_all_equal(placed, params)
