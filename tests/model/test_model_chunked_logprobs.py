"""Chunked log-probs / entropies (hidden states -> lm_head per chunk, remat) equal the full ones."""

from __future__ import annotations

import dataclasses
import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from model_testutil import TINY, variant

from calclip_jax.fp8 import PrecisionRecipe, TensorPrecision
from calclip_jax.model import (
    HeadDot,
    Transformer,
    chunked_token_logprobs_and_entropy,
    chunks_lm_head,
    lm_head_dot,
    lm_head_weight,
    token_logprobs_and_entropy,
)
from calclip_jax.model.chunked_logprobs import chunk_layout
from calclip_jax.train.forward import batch_logprobs

B, T = 3, 11  # T - 1 = 10 predictions: chunk 3 and 4 leave a padded last chunk
FP8_HEAD = dataclasses.replace(
    PrecisionRecipe.preset("fp8_tensor"), lm_head=TensorPrecision("e4m3", "tensor")
)


def _batch(seed: int = 1) -> dict[str, jax.Array]:
    rng = np.random.default_rng(seed)
    attn = np.ones((B, T), np.int32)
    attn[0, :2] = 0  # left padding
    positions = np.maximum(np.cumsum(attn, axis=1) - 1, 0).astype(np.int32)
    resp = np.zeros((B, T), np.int32)
    resp[:, 4:] = 1
    resp[1, 9:] = 0
    tokens = rng.integers(0, TINY.vocab_size, size=(B, T)).astype(np.int32) * attn
    return {"tokens": tokens, "positions": positions, "attn_mask": attn, "response_mask": resp}


def _params(config, recipe, seed: int = 0):
    b = _batch()
    args = (b["tokens"], b["positions"], b["attn_mask"])
    return Transformer(config, recipe).init(jax.random.key(seed), *args)["params"]


def _full_and_hidden(config, recipe, params, batch, temperature):
    """The unchunked (logp, entropy) and the final hidden states, from the same params."""
    model = Transformer(config, recipe)
    args = (batch["tokens"], batch["positions"], batch["attn_mask"])
    logits, _ = model.apply({"params": params}, *args)
    hidden, _ = model.apply({"params": params}, *args, return_hidden=True)
    full = token_logprobs_and_entropy(logits, batch["tokens"], batch["response_mask"], temperature)
    return full, hidden


class ChunkedTest(chex.TestCase):
    @chex.variants(with_jit=True, without_jit=True)
    def test_equals_unchunked(self):
        """The chunked computation (the variant: jitted or not) against the unchunked one,
        computed once per model (jitted) from the same parameters."""
        batch = _batch()
        for tied, preset, temperature in (
            (True, "bf16", 1.0),
            (True, "fp32", 0.7),
            (False, "bf16", 0.7),
            (False, "fp32", 1.0),
        ):
            config = variant(TINY, tie_embeddings=tied)
            recipe = PrecisionRecipe.preset(preset)
            params = _params(config, recipe)
            (lp, ent), hidden = jax.jit(
                functools.partial(
                    _full_and_hidden, config, recipe, batch=batch, temperature=temperature
                )
            )(params)
            head = lm_head_dot(config, recipe)
            for chunk in (1, 3, 4, 10, 64, None):
                tokens, mask = batch["tokens"], batch["response_mask"]
                fn = functools.partial(
                    chunked_token_logprobs_and_entropy, head=head, tokens_BT=tokens,
                    mask_BT=mask, temperature=temperature, chunk=chunk,
                )  # fmt: skip
                clp, cent = self.variant(fn)(hidden, lm_head_weight(config, params))
                chex.assert_shape([clp, cent], (B, T))
                chex.assert_type([clp, cent], jnp.float32)
                np.testing.assert_allclose(clp, lp, atol=1e-5, rtol=0, err_msg=str(chunk))
                np.testing.assert_allclose(cent, ent, atol=1e-5, rtol=0, err_msg=str(chunk))
                mask = batch["response_mask"] == 0
                assert not np.any(np.asarray(clp)[mask]) and not np.any(np.asarray(cent)[mask])
                assert not np.any(np.asarray(clp)[:, 0])

    @chex.variants(with_jit=True, without_jit=True)
    def test_gradients_match(self):
        batch = _batch()
        adv = jnp.array([1.0, -1.0, 0.5])[:, None]
        for tied, preset in ((True, "bf16"), (False, "fp32")):
            config = variant(TINY, tie_embeddings=tied)
            recipe = PrecisionRecipe.preset(preset)
            params = _params(config, recipe)

            def loss(p, chunk, config=config, recipe=recipe):
                lp, ent, _ = batch_logprobs(
                    config, recipe, p, {}, batch, temperature=0.8, chunk=chunk
                )
                return jnp.sum(lp * adv) + 0.1 * jnp.sum(ent)

            full = self.variant(jax.grad(lambda p: loss(p, None)))(params)
            chunked = self.variant(jax.grad(lambda p: loss(p, 3)))(params)
            jax.tree.map(functools.partial(_assert_grad_close, preset=preset), chunked, full)


def _assert_grad_close(chunked: jax.Array, full: jax.Array, preset: str) -> None:
    """float32 rounding only: both backward passes accumulate the weight gradient in float32
    (bf16 operands, float32 sums), the chunked one in a different order."""
    del preset
    chunked, full = np.asarray(chunked), np.asarray(full)
    np.testing.assert_allclose(chunked, full, rtol=1e-5, atol=1e-6 * np.max(np.abs(full)))


def test_fp8_lm_head_falls_back_to_the_same_numbers():
    """FP8 per-tensor lm_head: chunking would change the amax scales, so it is not chunked."""
    assert not chunks_lm_head(FP8_HEAD)
    assert chunks_lm_head(PrecisionRecipe.preset("fp8_tensor"))  # its lm_head is bf16
    batch = _batch()
    for tied in (True, False):
        config = variant(TINY, tie_embeddings=tied)
        params = _params(config, FP8_HEAD)

        def loss(p, chunk, config=config):
            lp, ent, _ = batch_logprobs(config, FP8_HEAD, p, {}, batch, chunk=chunk)
            return jnp.sum(lp) + jnp.sum(ent), (lp, ent)

        grad = jax.jit(jax.grad(loss, has_aux=True), static_argnums=1)
        (g_full, out_full), (g_chunk, out_chunk) = grad(params, None), grad(params, 3)
        jax.tree.map(np.testing.assert_array_equal, out_chunk, out_full)
        jax.tree.map(np.testing.assert_array_equal, g_chunk, g_full)


def test_backward_holds_one_chunk_of_logits():
    """No [.., V] float array larger than one chunk in the forward+backward program."""
    b, t, d, v, chunk = 2, 33, 8, 64, 4
    rng = np.random.default_rng(0)
    hidden = jnp.asarray(rng.normal(size=(b, t, d)), jnp.float32)
    weight = jnp.asarray(rng.normal(size=(v, d)), jnp.float32)
    tokens = jnp.asarray(rng.integers(0, v, size=(b, t)), jnp.int32)
    mask = jnp.ones((b, t), jnp.int32)
    project = lm_head_dot(variant(TINY, vocab_size=v, d_model=d), PrecisionRecipe())

    def loss(h, w):
        lp, ent = chunked_token_logprobs_and_entropy(h, w, project, tokens, mask, 1.0, chunk)
        return jnp.sum(lp) + jnp.sum(ent)

    jaxpr = jax.make_jaxpr(jax.grad(loss, argnums=(0, 1)))(hidden, weight)
    shapes = [var.aval.shape for eqn in _eqns(jaxpr.jaxpr) for var in eqn.outvars]
    assert (b, chunk, v) in shapes  # the chunk's logits
    big = [s for s in shapes if len(s) >= 3 and s[-1] == v and np.prod(s[:-1]) > b * chunk]
    assert not big, big


def _eqns(jaxpr):
    """Equations of `jaxpr` and of the jaxprs in its equations' params (scan, remat, pjit)."""
    for eqn in jaxpr.eqns:
        yield eqn
        for value in eqn.params.values():
            for sub in value if isinstance(value, tuple | list) else (value,):
                sub = getattr(sub, "jaxpr", sub)  # ClosedJaxpr -> Jaxpr
                if hasattr(sub, "eqns"):
                    yield from _eqns(sub)


def test_edge_cases():
    project = HeadDot(tied=True, dtype=jnp.float32, precision=None)
    hidden, weight = jnp.ones((2, 1, 4)), jnp.ones((5, 4))
    tokens, mask = jnp.zeros((2, 1), jnp.int32), jnp.ones((2, 1))
    lp, ent = chunked_token_logprobs_and_entropy(hidden, weight, project, tokens, mask, 1.0, 2)
    chex.assert_trees_all_equal((lp, ent), (jnp.zeros((2, 1)), jnp.zeros((2, 1))))
    with pytest.raises(ValueError, match="chunk"):
        chunked_token_logprobs_and_entropy(hidden, weight, project, tokens, mask, 1.0, 0)
    with pytest.raises(ValueError, match="temperature"):
        chunked_token_logprobs_and_entropy(hidden, weight, project, tokens, mask, 0.0, 2)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4096), st.one_of(st.none(), st.integers(1, 512)))
def test_chunk_layout_is_the_fewest_equal_chunks(n_pred, chunk):
    n, c = chunk_layout(n_pred, chunk)
    limit = n_pred if chunk is None else chunk
    assert c <= limit and n == -(-n_pred // limit)  # the fewest chunks of at most `chunk`
    assert n_pred <= n * c < n_pred + n  # padding: fewer positions than chunks
    assert chunk_layout(80, 64) == (2, 40)  # the real model's 81 positions: not padded to 128


@pytest.mark.parametrize("tied", [True, False])
def test_head_gradient_is_within_float32_rounding_of_float64(tied):
    """`HeadDot.vjp` (float32): dx and dw against the float64 products, each element within the
    dot's rounding bound gamma_K * (|a| |b|)_ij (K the contraction; u = 2^-24) plus the output
    rounding. dw contracts the tokens, read from the [tokens, V] cotangent as stored."""
    n_tok, d, v = 48, 16, 70
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, n_tok // 2, d)).astype(np.float32)
    w = rng.normal(size=(v, d) if tied else (d, v)).astype(np.float32)
    g = (rng.normal(size=(2, n_tok // 2, v)) * np.exp(rng.normal(size=v))).astype(np.float32)
    head = HeadDot(tied, jnp.float32, jax.lax.Precision.HIGHEST)
    dx, dw = jax.jit(head.vjp)(x, w, g)
    x64, w64, g64 = (a.astype(np.float64).reshape(-1, a.shape[-1]) for a in (x, w, g))
    w_dv = w64.T if tied else w64  # [D, V]
    u = 2.0**-24
    gamma = lambda k: k * u / (1 - k * u)
    for got, exact, bound in (
        (dx, g64 @ w_dv.T, gamma(v) * (np.abs(g64) @ np.abs(w_dv).T)),
        (dw, (g64.T @ x64) if tied else (x64.T @ g64), None),
    ):
        if bound is None:
            abs_prod = np.abs(g64).T @ np.abs(x64) if tied else np.abs(x64).T @ np.abs(g64)
            bound = gamma(n_tok) * abs_prod
        got = np.asarray(got, np.float64).reshape(exact.shape)
        assert np.all(np.abs(got - exact) <= bound + u * np.abs(exact)), tied
