"""Rollout log-probs are those of the distribution actually sampled from (temperature, top-k),
and the trainer's tempered log-probs reproduce them."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from rollout_testutil import FWD, TINY, init_params, prompts

from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.rollout import sample
from calclip_jax.train.forward import batch_logprobs

BF16 = PrecisionRecipe.preset("bf16")


def _rollout(params, temperature: float, **filters):
    tokens, mask = prompts(4, 6, seed=3)
    return sample(
        params, TINY, BF16, tokens, mask, jax.random.key(1), num_samples=4, max_new_tokens=8,
        temperature=temperature, eos_id=-1, pad_id=0, **filters,
    )  # fmt: skip


def _trainer_logp(params, out, temperature: float) -> np.ndarray:
    batch = {"tokens": out.tokens, "positions": out.positions, "attn_mask": out.attn_mask}
    batch["response_mask"] = out.response_mask
    fn = jax.jit(lambda p, b: batch_logprobs(TINY, BF16, p, {}, b, temperature=temperature)[0])
    return np.asarray(fn(params, batch))


@pytest.fixture(scope="module")
def params():
    return init_params(seed=2)


@pytest.mark.parametrize("temperature", [0.5, 1.0, 1.7])
def test_bf16_sampler_and_trainer_agree_at_temperature(params, temperature):
    """The decode step's dots ([B, 1] rows) and the trainer's ([B, T]) are bitwise where XLA runs
    them with one kernel (jax 0.10 on CPU); a per-shape kernel (jax 0.12's YNNPACK fusion on our
    Intel Xeon CI host) moves a row's logits by about one bfloat16 rounding, so the tolerance is
    that scale: two bfloat16 ulps (2^-7 relative) of the position's largest logit, over T."""
    out = _rollout(params, temperature)
    mask = np.asarray(out.response_mask).astype(bool)
    trainer = _trainer_logp(params, out, temperature)
    gap = np.abs(np.asarray(out.rollout_logp) - trainer)
    logits = FWD(TINY, params, out.tokens, BF16, out.attn_mask)  # position t predicts token t + 1
    scale = np.zeros_like(gap)
    scale[:, 1:] = 2 * 2.0**-7 * np.abs(np.asarray(logits, np.float32)).max(-1)[:, :-1]
    assert np.all(gap[mask] <= scale[mask] / temperature), (gap / scale)[mask].max()
    if temperature != 1.0:  # the untempered trainer is measurably off: the bug this guards
        untempered = _trainer_logp(params, out, 1.0)
        assert gap[mask].mean() < 1e-3 < 1e-2 < np.abs(out.rollout_logp - untempered)[mask].mean()


def test_top_k_one_samples_with_probability_one(params):
    out = _rollout(params, 0.8, top_k=1)
    mask = np.asarray(out.response_mask).astype(bool)
    np.testing.assert_array_equal(np.asarray(out.rollout_logp)[mask], 0.0)


def test_top_p_logp_is_of_the_renormalized_nucleus(params):
    full = _rollout(params, 1.0)
    nucleus = _rollout(params, 1.0, top_p=0.5)
    mask = np.asarray(nucleus.response_mask).astype(bool)
    # a truncated distribution gives each kept token at least its untruncated probability
    trainer = _trainer_logp(params, nucleus, 1.0)
    assert np.all(np.asarray(nucleus.rollout_logp)[mask] >= trainer[mask] - 1e-6)
    assert (
        np.asarray(nucleus.rollout_logp)[mask].mean()
        > np.asarray(full.rollout_logp)[np.asarray(full.response_mask).astype(bool)].mean()
    )
