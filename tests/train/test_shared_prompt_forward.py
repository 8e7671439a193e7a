"""`batch_logprobs` with a shared prompt (`train.share_prompt`) vs the whole-sequence forward."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from train_testutil import rollout_batch

from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model import ModelConfig
from calclip_jax.model.shared_prompt import PromptGroups, check_prompt_groups
from calclip_jax.train import init_variables
from calclip_jax.train.forward import batch_logprobs

MODEL = ModelConfig(
    vocab_size=48, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=8, d_ff=64,
    qk_norm=True,
)  # fmt: skip
GROUPS, G, P, N = 3, 4, 5, 6


def grouped_batch() -> dict[str, np.ndarray]:
    """3 prompts x 4 responses, prompts left-padded by 0, 1 and 2 columns, ragged responses."""
    return rollout_batch(GROUPS * G, P, N, seed=0, vocab=MODEL.vocab_size, group=G)


@functools.cache
def params_of(preset: str):
    return init_variables(MODEL, PrecisionRecipe.preset(preset), jax.random.key(1))[0]


def logprobs(
    preset: str, shared: bool, chunk: int | None = None, params=None
) -> tuple[jax.Array, jax.Array]:
    """(logp_BT, entropy_BT) of the grouped batch, jitted op by op (not as one program)."""
    batch = grouped_batch()
    params = params_of(preset) if params is None else params
    groups = PromptGroups(G, N) if shared else None
    recipe = PrecisionRecipe.preset(preset)
    return batch_logprobs(
        MODEL, recipe, params, {}, batch, temperature=0.9, chunk=chunk, shared_prompt=groups
    )[:2]


# Rounding only: other GEMM shapes, another summation order. Row- and block-wise FP8 scales see
# the same rows either way. Over the whole sequence attention is `jax.nn.dot_product_attention`,
# with the shared prompt `attend`; both round its output to bfloat16 for bf16 and FP8: a bf16 ulp
# (2^-8 relative) of an attention output rounded differently moves a bf16 log-prob by up to
# about 1e-2 (measured: 7e-3).
@pytest.mark.parametrize(("preset", "atol"), [("fp32", 2e-5), ("bf16", 2e-2), ("fp8_block", 2e-5)])
def test_shared_prompt_logprobs_match_the_whole_sequence(preset, atol):
    full_lp, full_ent = logprobs(preset, shared=False)
    lp, ent = logprobs(preset, shared=True)
    mask = grouped_batch()["response_mask"].astype(bool)
    assert lp.shape == full_lp.shape and np.all(np.asarray(lp)[~mask] == 0)
    assert np.all(np.asarray(full_lp)[mask] < 0)
    np.testing.assert_allclose(np.asarray(lp)[mask], np.asarray(full_lp)[mask], atol=atol)
    np.testing.assert_allclose(np.asarray(ent)[mask], np.asarray(full_ent)[mask], atol=atol)


def test_shared_prompt_fp8_tensor_scaling_is_no_worse():
    """Per-tensor current scaling takes its amax per part (prompt rows, response rows): other
    scales, so other log-probs (measured: up to 0.59 apart), but as close to float32's as the
    whole-sequence FP8 forward's (mean |error| within 1.5x of it)."""
    mask = grouped_batch()["response_mask"].astype(bool)
    ref = np.asarray(logprobs("fp32", shared=False)[0])[mask]
    full = np.asarray(logprobs("fp8_tensor", shared=False, params=params_of("fp32"))[0])[mask]
    shared = np.asarray(logprobs("fp8_tensor", shared=True, params=params_of("fp32"))[0])[mask]
    full_err, shared_err = np.mean(np.abs(full - ref)), np.mean(np.abs(shared - ref))
    assert 0 < shared_err < 1.5 * full_err, (shared_err, full_err)
    assert np.max(np.abs(shared - full)) > 1e-3  # the scales did move: a different program


def test_shared_prompt_gradients_match_the_whole_sequence():
    """float32: the gradient of a masked log-prob sum, through the group's shared prompt."""
    weights = np.random.default_rng(2).standard_normal((GROUPS * G, P + N)).astype(np.float32)

    def grad(shared: bool):
        loss = lambda p: jnp.sum(logprobs("fp32", shared, params=p)[0] * weights)
        return jax.jit(jax.grad(loss))(params_of("fp32"))

    full, shared = grad(False), grad(True)
    for a, b in zip(jax.tree.leaves(full), jax.tree.leaves(shared), strict=True):
        scale = float(jnp.max(jnp.abs(a)))
        assert scale > 0
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), atol=1e-5 * scale)


def test_shared_prompt_chunked_equals_unchunked():
    """logprob_chunk on top of a shared prompt: the same values (float32 rounding)."""
    whole = logprobs("fp32", shared=True)
    chunked = logprobs("fp32", shared=True, chunk=3)
    for a, b in zip(whole, chunked, strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), atol=2e-6)


def test_shared_prompt_refuses_a_delayed_recipe():
    recipe, groups = PrecisionRecipe.preset("fp8_delayed"), PromptGroups(G, N)
    with pytest.raises(ValueError, match="delayed"):  # raised before the params are read
        batch_logprobs(MODEL, recipe, params_of("fp32"), {}, grouped_batch(), shared_prompt=groups)


def test_check_prompt_groups():
    batch = grouped_batch()
    check_prompt_groups(batch, PromptGroups(G, N))
    with pytest.raises(ValueError, match="groups of 5"):
        check_prompt_groups(batch, PromptGroups(5, N))
    with pytest.raises(ValueError, match="no prompt"):
        check_prompt_groups(batch, PromptGroups(G, P + N))
    broken = {k: v.copy() for k, v in batch.items()}
    broken["tokens"][1, P - 1] += 1  # row 1's prompt differs from row 0's
    with pytest.raises(ValueError, match="'tokens'"):
        check_prompt_groups(broken, PromptGroups(G, N))
    with pytest.raises(ValueError, match="response tokens"):
        check_prompt_groups(batch, PromptGroups(G, N - 1))  # column P would be a prompt's
    with pytest.raises(ValueError, match=">= 1"):
        PromptGroups(0, N)
