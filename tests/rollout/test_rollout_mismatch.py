"""FP8 rollout vs BF16 trainer mismatch on sampled tokens, by granularity (measured, bounded)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from rollout_testutil import FWD, TINY, init_params, prompts

from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model import token_logprobs_and_entropy
from calclip_jax.rollout import sample


def mismatch(rollout_logp, trainer_logp, mask) -> tuple[float, float]:
    """(mean |logp_rollout - logp_trainer|, k3 KL E[rho - 1 - log rho]), rho = trainer/rollout."""
    m = mask.astype(jnp.float32)
    log_rho = (trainer_logp - rollout_logp) * m
    k3 = jnp.sum((jnp.exp(log_rho) - 1 - log_rho) * m) / m.sum()
    return float(jnp.sum(jnp.abs(log_rho)) / m.sum()), float(k3)


@pytest.fixture(scope="module")
def rollout():
    params = init_params(seed=5)
    tokens, mask = prompts(4, 6, seed=1)
    batch = sample(
        params, TINY, PrecisionRecipe.preset("bf16"), tokens, mask, jax.random.key(0),
        num_samples=4, max_new_tokens=8, eos_id=-1, pad_id=0,
    )  # fmt: skip
    return params, batch


def _logp(params, preset, batch):
    logits = FWD(TINY, params, batch.tokens, PrecisionRecipe.preset(preset), batch.attn_mask)
    return token_logprobs_and_entropy(logits, batch.tokens, batch.response_mask)[0]


@pytest.mark.parametrize("granularity", ["tensor", "block"])
def test_fp8_rollout_vs_bf16_trainer(rollout, granularity):
    params, batch = rollout
    bf16 = _logp(params, "bf16", batch)
    base_abs, _ = mismatch(batch.rollout_logp, bf16, batch.response_mask)  # bf16 vs bf16
    fp8 = _logp(params, f"fp8_{granularity}", batch)
    mean_abs, k3 = mismatch(fp8, bf16, batch.response_mask)
    print(
        f"fp8_{granularity}: mean|dlogp|={mean_abs:.3e} k3={k3:.3e} (bf16 vs bf16 {base_abs:.1e})"
    )
    assert base_abs < 1e-3 < mean_abs  # FP8 noise is visible above the bf16 cache/recompute noise
    assert mean_abs < 0.1 and 0.0 < k3 < 0.01  # E4M3: rel. half-ulp 1/16 per operand
