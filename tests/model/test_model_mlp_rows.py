"""The MLP on tokens as rows ([N, D]) against the [B, T, D] MLP it replaced: the same bits,
value and gradients, at every precision and in whole models; and no transposed copy in its
float32 backward."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from model_testutil import variant

from calclip_jax.fp8 import PrecisionRecipe, RecipeDense
from calclip_jax.fp8.vocabulary import PRESETS
from calclip_jax.model import ModelConfig, Transformer, transformer
from calclip_jax.model.mlp import MLP

QWEN3_TINY = ModelConfig.preset("qwen3_tiny")  # SwiGLU 128 -> 384, q/k norm, untied lm_head
SFT_TOY = variant(  # the toy of configs/grpo.py, which the SFT warm starts train in float32
    ModelConfig.preset("tiny"),
    d_model=64,
    n_layers=2,
    n_heads=4,
    n_kv_heads=2,
    head_dim=16,
    d_ff=192,
    qk_norm=False,
    tie_embeddings=True,
)


class TokensMLP(MLP):
    """The MLP before the rows view: every RecipeDense on [B, T, D] (same parameter names)."""

    @nn.compact
    def __call__(self, x_BTD: jax.Array) -> jax.Array:
        cfg, pol = self.config, self.recipe
        gate_BTF = RecipeDense(cfg.d_ff, pol, name="gate_proj")(x_BTD)
        up_BTF = RecipeDense(cfg.d_ff, pol, name="up_proj")(x_BTD)
        return RecipeDense(cfg.d_model, pol, name="down_proj")(jax.nn.silu(gate_BTF) * up_BTF)


def _value_and_grads(module: nn.Module, variables, x, g):
    """Jitted MLP output and the gradients of <output, g> w.r.t. params and x (fp8_delayed's
    amax histories as they are: not updated)."""

    def f(params, x):
        return module.apply({**variables, "params": params}, x)

    def run(params, x, g):
        y, pull = jax.vjp(f, params, x)
        return y, pull(g)

    return jax.jit(run)(variables["params"], x, g)


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("shape", [(8, 48), (3, 7)])
def test_rows_mlp_is_bitwise_the_tokens_mlp(preset, shape):
    recipe = PrecisionRecipe.preset(preset)
    config = QWEN3_TINY
    keys = jax.random.split(jax.random.key(sum(shape)), 3)
    x = jax.random.normal(keys[0], (*shape, config.d_model)) * 2
    g = jax.random.normal(keys[1], (*shape, config.d_model))
    variables = MLP(config, recipe).init(keys[2], x)
    new = _value_and_grads(MLP(config, recipe), variables, x, g)
    old = _value_and_grads(TokensMLP(config, recipe), variables, x, g)
    leaves = jax.tree.leaves(new)
    assert len(leaves) == 5  # output, three kernel gradients, x gradient
    for a, e in zip(leaves, jax.tree.leaves(old), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(e))


def _loss_and_grads(config: ModelConfig, params, tokens):
    model = Transformer(config, PrecisionRecipe.preset("fp32"))
    mask = jnp.ones_like(tokens).at[:, -3:].set(0)  # padding at the end, as SFT batches have
    positions = jnp.cumsum(mask, 1) - 1

    def loss(params):
        logits, _ = model.apply({"params": params}, tokens, positions, mask)
        logp = jnp.take_along_axis(jax.nn.log_softmax(logits[:, :-1]), tokens[:, 1:, None], -1)
        return -jnp.mean(logp[..., 0] * mask[:, 1:])

    return jax.jit(jax.value_and_grad(loss))(params)


@pytest.mark.parametrize("config", [QWEN3_TINY, SFT_TOY], ids=["qwen3_tiny", "sft_toy"])
def test_float32_model_gradients_are_bitwise_the_tokens_mlp(config, monkeypatch):
    """XLA picks layouts for the whole step, so the rows view could change other ops' bits; in
    these models (the Tunix benchmark's, the SFT warm start's) nothing changes."""
    tokens = jax.random.randint(jax.random.key(1), (16, 24), 0, config.vocab_size)
    model = Transformer(config, PrecisionRecipe.preset("fp32"))
    params = jax.jit(model.init)(jax.random.key(0), tokens, tokens, jnp.ones_like(tokens))
    new = _loss_and_grads(config, params["params"], tokens)
    monkeypatch.setattr(transformer, "MLP", TokensMLP)
    old = _loss_and_grads(config, params["params"], tokens)
    for a, e in zip(jax.tree.leaves(new), jax.tree.leaves(old), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(e))


def _compiled_float32_backward(module_cls: type[MLP]) -> str:
    """XLA-CPU's optimized HLO of the float32 MLP's gradients on [64, 48, 128]."""
    mlp, x = module_cls(QWEN3_TINY, PrecisionRecipe.preset("fp32")), jnp.ones((64, 48, 128))
    params = mlp.init(jax.random.key(0), x)
    grads = jax.jit(jax.grad(lambda p, x: jnp.sum(mlp.apply(p, x) ** 2)))
    return grads.lower(params, x).compile().as_text()


def test_float32_backward_has_no_transposed_copy():
    """On [B, T, F] each gate/up weight gradient waits on a transposing copy of the SiLU
    backward's output; on rows it needs none."""
    assert " transpose(" not in _compiled_float32_backward(MLP)
    assert " transpose(" in _compiled_float32_backward(TokensMLP)
