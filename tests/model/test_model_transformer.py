"""Shapes, parameter names, padding behaviour and recipe wiring of the Transformer."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax.traverse_util import flatten_dict
from model_testutil import TINY, init_params, variant

from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model import Transformer, forward_logits, positions_from_mask


@pytest.fixture(scope="module")
def tiny_params() -> dict:
    return init_params(TINY)


class TransformerShapeTest(chex.TestCase):
    @chex.variants(with_jit=True, without_jit=True)
    def test_logits_shape_and_dtype(self):
        params = init_params(TINY)
        tokens = jax.random.randint(jax.random.key(1), (3, 7), 0, TINY.vocab_size)

        @self.variant
        def run(params, tokens):
            return forward_logits(TINY, params, tokens, PrecisionRecipe.preset("bf16"))

        logits = run(params, tokens)
        chex.assert_shape(logits, (3, 7, TINY.vocab_size))
        chex.assert_type(logits, jnp.float32)
        chex.assert_tree_all_finite(logits)


def _names(config) -> set[str]:
    return {"/".join(k) for k in flatten_dict(init_params(config))}


def test_param_names_tied_plain():
    names = _names(TINY)
    assert "embed/embedding" in names and "final_norm/scale" in names
    assert "lm_head/kernel" not in names
    for part in ("attn_norm/scale", "mlp_norm/scale", "attn/o_proj/kernel", "mlp/down_proj/kernel"):
        assert f"layers_1/{part}" in names
    assert not any("bias" in n or "q_norm" in n for n in names)


def test_param_names_and_shapes_untied_bias_qknorm():
    cfg = variant(TINY, tie_embeddings=False, attention_bias=True, qk_norm=True)
    flat = {"/".join(k): v.shape for k, v in flatten_dict(init_params(cfg)).items()}
    d, h = cfg.d_model, cfg.head_dim
    assert flat["lm_head/kernel"] == (d, cfg.vocab_size)
    assert flat["layers_0/attn/q_proj/kernel"] == (d, cfg.n_heads * h)
    assert flat["layers_0/attn/k_proj/bias"] == (cfg.n_kv_heads * h,)
    assert flat["layers_0/attn/o_proj/kernel"] == (cfg.n_heads * h, d)
    assert flat["layers_0/attn/q_norm/scale"] == (h,)
    assert flat["layers_0/mlp/gate_proj/kernel"] == (d, cfg.d_ff)
    assert "layers_0/attn/o_proj/bias" not in flat


def test_params_identical_across_policies():
    tokens = jnp.zeros((1, 4), jnp.int32)

    def shapes(preset: str):
        model = Transformer(TINY, PrecisionRecipe.preset(preset))
        out = jax.eval_shape(model.init, jax.random.key(0), tokens, tokens, tokens)
        return jax.tree.map(lambda x: (x.shape, x.dtype), out)

    ref = shapes("fp32")
    assert set(ref) == {"params"}
    for preset in ("bf16", "fp8_tensor", "fp8_channel", "fp8_block", "fp8_mx"):
        assert shapes(preset) == ref, preset


def test_left_padding_matches_unpadded(tiny_params):
    tokens = jax.random.randint(jax.random.key(2), (1, 6), 1, TINY.vocab_size)
    pad = 3
    padded = jnp.concatenate([jnp.zeros((1, pad), jnp.int32), tokens], axis=1)
    mask = jnp.concatenate([jnp.zeros((1, pad), jnp.int32), jnp.ones((1, 6), jnp.int32)], axis=1)
    ref = forward_logits(TINY, tiny_params, tokens)
    got = forward_logits(TINY, tiny_params, padded, attn_mask=mask)
    np.testing.assert_allclose(got[:, pad:], ref, atol=1e-5)
    np.testing.assert_array_equal(positions_from_mask(mask)[0], [0, 0, 0, 0, 1, 2, 3, 4, 5])


def test_causal_future_tokens_do_not_matter(tiny_params):
    a = jax.random.randint(jax.random.key(3), (2, 8), 0, TINY.vocab_size)
    b = a.at[:, 5:].set((a[:, 5:] + 1) % TINY.vocab_size)
    la, lb = forward_logits(TINY, tiny_params, a), forward_logits(TINY, tiny_params, b)
    np.testing.assert_allclose(la[:, :5], lb[:, :5], atol=1e-6)
    assert np.abs(np.asarray(la[:, 5:] - lb[:, 5:])).max() > 1e-4


@pytest.mark.parametrize("preset", ["bf16", "fp8_tensor", "fp8_mx"])
def test_recipe_forward_close_to_fp32(tiny_params, preset):
    tokens = jax.random.randint(jax.random.key(4), (2, 8), 0, TINY.vocab_size)
    ref = forward_logits(TINY, tiny_params, tokens)
    got = forward_logits(TINY, tiny_params, tokens, PrecisionRecipe.preset(preset))
    err = float(jnp.max(jnp.abs(got - ref)))
    scale = float(jnp.max(jnp.abs(ref)))
    # E4M3 has 3 mantissa bits (rel. half-ulp 1/16); errors of a few GEMMs stay well below that.
    bound = 0.02 if preset == "bf16" else 0.25
    assert 0.0 < err <= bound * scale, (preset, err, scale)


def test_model_is_pure_function_of_params_and_tokens(tiny_params):
    model = Transformer(TINY, PrecisionRecipe.preset("fp32"))
    tokens = jnp.arange(10, dtype=jnp.int32).reshape(2, 5)
    pos, mask = positions_from_mask(jnp.ones_like(tokens)), jnp.ones_like(tokens)
    out1, cache = model.apply({"params": tiny_params}, tokens, pos, mask)
    out2, _ = jax.jit(model.apply)({"params": tiny_params}, tokens, pos, mask)
    assert cache is None
    np.testing.assert_allclose(out1, out2, atol=1e-5)
