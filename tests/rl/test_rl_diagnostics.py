"""rl_diagnostics: exact metric names, values against NumPy, zero-grad fractions vs jax.grad."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from calclip_jax.rl.diagnostics import (
    CLIP_METRICS,
    MISMATCH_METRICS,
    RATIO_QUANTILE_METRICS,
    SHADOW_METRICS,
    rl_diagnostics,
)
from calclip_jax.rl.losses import ppo_policy_loss

B, T = 6, 10
BOUNDS = (0.8, 1.28)
QS = {"p01": 0.01, "p05": 0.05, "p50": 0.5, "p95": 0.95, "p99": 0.99}
NAMES = {
    "entropy", "clip_frac_lower_neg", "clip_frac_upper_pos", "clip_frac_lower_neg_ref",
    "clip_frac_upper_pos_ref", "zero_grad_frac_neg", "zero_grad_frac_pos", "clip_lower",
    "clip_upper", "mismatch_k3", "mismatch_logp_abs", "token_mult_prob_error", "max_prob_diff",
    "kl_ref",
} | {f"ratio_{s}_{q}" for s in ("neg", "pos") for q in QS}  # fmt: skip


def _batch(seed=0):
    rng = np.random.default_rng(seed)
    old = rng.uniform(-3.0, -0.05, (B, T)).astype(np.float32)
    logp = (old + rng.uniform(-1.5, 1.5, (B, T))).astype(np.float32)
    rollout = (old + rng.normal(0, 0.5, (B, T))).astype(np.float32)
    ref = (logp + rng.normal(0, 0.3, (B, T))).astype(np.float32)
    ratio_ref = np.exp(rng.normal(0, 0.2, (B, T))).astype(np.float32)
    mask = rng.random((B, T)) < 0.8
    adv = np.array([1.0, -0.5, 0.0, 2.0, -1.5, -0.2], np.float32)
    entropy = rng.uniform(0, 3, (B, T)).astype(np.float32)
    weights = (rng.random((B, T)) < 0.85).astype(np.float32)
    return logp, old, rollout, ref, ratio_ref, mask, adv, entropy, weights


def test_names_and_values():
    logp, old, rollout, ref, ratio_ref, mask, adv, entropy, _ = _batch()
    out = jax.jit(
        lambda *a: rl_diagnostics(*a[:4], BOUNDS, rollout_logp_BT=a[4], entropy=a[5],
                                  ratio_ref_BT=a[6], ref_bounds=(0.75, 1.3), ref_logp_BT=a[7])
    )(logp, old, adv, mask, rollout, entropy, ratio_ref, ref)  # fmt: skip
    assert set(out) == NAMES
    a = np.broadcast_to(adv[:, None], (B, T))
    neg, pos = mask & (a < 0), mask & (a > 0)
    r = np.exp(logp - old)
    d = old - rollout
    want = {
        "entropy": entropy[mask].mean(),
        "clip_lower": 0.8,
        "clip_upper": 1.28,
        "clip_frac_lower_neg": (r[neg] < 0.8).mean(),
        "clip_frac_upper_pos": (r[pos] > 1.28).mean(),
        "clip_frac_lower_neg_ref": (ratio_ref[neg] < 0.75).mean(),
        "clip_frac_upper_pos_ref": (ratio_ref[pos] > 1.3).mean(),
        "zero_grad_frac_neg": (r[neg] < 0.8).mean(),
        "zero_grad_frac_pos": (r[pos] > 1.28).mean(),
        "mismatch_k3": (np.exp(d) - 1 - d)[mask].mean(),
        "mismatch_logp_abs": np.abs(d)[mask].mean(),
        "token_mult_prob_error": np.exp(np.abs(d))[mask].mean(),
        "max_prob_diff": np.abs(np.exp(old) - np.exp(rollout))[mask].max(),
        "kl_ref": (np.exp(ref - logp) - (ref - logp) - 1)[mask].mean(),
    }
    for sign, sel in (("neg", neg), ("pos", pos)):
        for name, q in QS.items():
            want[f"ratio_{sign}_{name}"] = np.quantile(r[sel], q, method="lower")
    for name, value in want.items():
        np.testing.assert_allclose(float(out[name]), value, rtol=1e-5, err_msg=name)


@pytest.mark.parametrize("dual_clip_c", [None, 2.0])
@pytest.mark.parametrize("use_weights", [False, True])
def test_zero_grad_frac_matches_gradient(dual_clip_c, use_weights):
    logp, old, _, _, _, mask, adv, _, weights = _batch(1)
    w = weights if use_weights else None

    def loss(lp):
        return ppo_policy_loss(lp, old, adv, mask, eps_low=0.2, eps_high=0.28,
                               dual_clip_c=dual_clip_c, is_weights=w)[0]  # fmt: skip

    zero = np.asarray(jax.grad(loss)(logp)) == 0.0
    out = rl_diagnostics(logp, old, adv, mask, BOUNDS, dual_clip_c=dual_clip_c, is_weights_BT=w)
    a = np.broadcast_to(adv[:, None], (B, T))
    for sign, sel in (("neg", mask & (a < 0)), ("pos", mask & (a > 0))):
        np.testing.assert_allclose(float(out[f"zero_grad_frac_{sign}"]), zero[sel].mean())
    assert 0.0 < float(out["zero_grad_frac_neg"]) < 1.0


def test_optional_metrics_absent_and_empty_sign():
    logp, old, _, _, _, mask, _, _, _ = _batch(2)
    out = rl_diagnostics(logp, old, jnp.ones(B), mask, BOUNDS)
    assert not {"entropy", "mismatch_k3", "kl_ref", "clip_frac_lower_neg_ref"} & set(out)
    assert float(out["clip_frac_lower_neg"]) == 0.0 and np.isnan(float(out["ratio_neg_p50"]))
    assert np.isfinite(float(out["ratio_pos_p50"]))


def test_metric_name_groups_are_what_it_reports():
    logp, old, rollout, _, ratio_ref, mask, adv, _, _ = _batch()
    bare = rl_diagnostics(logp, old, adv, mask, BOUNDS)
    assert set(bare) == {*CLIP_METRICS, *RATIO_QUANTILE_METRICS}
    full = rl_diagnostics(logp, old, adv, mask, BOUNDS, rollout_logp_BT=rollout,
                          ratio_ref_BT=ratio_ref)  # fmt: skip
    assert set(full) == {*CLIP_METRICS, *RATIO_QUANTILE_METRICS, *SHADOW_METRICS, *MISMATCH_METRICS}
