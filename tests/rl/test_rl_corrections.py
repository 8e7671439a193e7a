"""mismatch_weights against a NumPy port of verl's rollout correction, alone and in the loss."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calclip_jax.rl.corrections import MODES, CorrectionConfig, mismatch_weights
from calclip_jax.rl.losses import AGGREGATIONS, ppo_policy_loss

B, T = 6, 7
SAFETY_BOUND = 20.0  # verl rollout_corr_helper.SAFETY_BOUND


def _batch(seed, noise=0.3):
    rng = np.random.default_rng(seed)
    old = rng.uniform(-3.0, -0.1, (B, T)).astype(np.float32)
    logp = (old + rng.uniform(-0.6, 0.6, (B, T))).astype(np.float32)
    rollout = (old + rng.normal(0, noise, (B, T))).astype(np.float32)
    mask = (rng.random((B, T)) < 0.8).astype(np.float32)
    mask[0, :] = 0.0  # an empty sequence
    mask[1, :] = 1.0
    adv_B = rng.normal(size=B).astype(np.float32)
    return logp, old, rollout, mask, adv_B


# --- NumPy port of verl (volcengine/verl@2f2996b7d, verl/trainer/ppo/rollout_corr_helper.py and
# core_algos.py), float64. Padding: verl masks log-ratio sums with response_mask.
def _masked_sum(x, m, axis=None):
    return np.where(m > 0, x, 0.0).sum(axis=axis)


def _masked_mean(x, m, axis=None):
    return _masked_sum(x, m, axis) / (m.sum(axis=axis) + 1e-8)


def _level_weights(log_ratio, mask, level):
    """The safety-bounded ratio of one aggregation level, broadcast to [B, T]."""
    if level == "token":
        return np.exp(np.clip(log_ratio, -SAFETY_BOUND, SAFETY_BOUND))
    agg = _masked_sum if level == "sequence" else _masked_mean  # "geometric": mean log-ratio
    stat = agg(log_ratio, mask, axis=-1)[:, None]
    return np.broadcast_to(np.exp(np.clip(stat, -SAFETY_BOUND, SAFETY_BOUND)), log_ratio.shape)


def verl_is_weights(log_ratio, mask, rollout_is, threshold):
    """compute_rollout_correction_weights: truncated IS weights, zero on padding."""
    return np.minimum(_level_weights(log_ratio, mask, rollout_is) * mask, threshold)


def verl_rs_mask(log_ratio, mask, rollout_rs, upper, lower):
    """compute_rollout_rejection_mask: response_mask * 1[lower <= w <= upper]."""
    w = _level_weights(log_ratio, mask, rollout_rs)
    return mask * ((w >= lower) & (w <= upper))


def verl_correction(old, rollout, mask, cfg):
    """(rollout_is_weights or None, modified_response_mask) for the verl config of `cfg.mode`."""
    lr = old.astype(np.float64) - rollout.astype(np.float64)
    m = mask.astype(np.float64)
    c = cfg
    if c.mode == "none":
        return None, m
    if c.mode in ("token_tis", "seq_tis"):
        level = "token" if c.mode == "token_tis" else "sequence"
        return verl_is_weights(lr, m, level, c.tis_cap), m
    if c.mode in ("token_mis", "seq_mis"):  # rollout_is + rollout_rs at the same level
        level = "token" if c.mode == "token_mis" else "sequence"
        w = verl_is_weights(lr, m, level, c.mis_high)
        return w, verl_rs_mask(lr, m, level, c.mis_high, c.mis_low)
    # Geo-RS: rollout_is=None, rollout_rs="geometric"
    return None, verl_rs_mask(lr, m, "geometric", 1 + c.geo_delta, 1 - c.geo_delta)


def verl_policy_loss(old, logp, adv, mask, lower, upper, clip_ratio_c, is_weights, agg):
    """compute_policy_loss_vanilla (dual-clip always on in verl) + agg_loss."""
    ratio = np.exp(np.clip(logp - old, -20.0, 20.0))
    pg1 = -adv * ratio
    pg2 = -adv * np.clip(ratio, lower, upper)
    clip1 = np.maximum(pg1, pg2)
    clip2 = np.minimum(-adv * clip_ratio_c, clip1)
    pg = np.where(adv < 0, clip2, clip1)
    if is_weights is not None:
        pg = pg * is_weights
    if agg == "token-mean":
        return _masked_sum(pg, mask) / mask.sum()
    seq_tokens = mask.sum(-1)
    seq = _masked_sum(pg, mask, -1)
    if agg == "seq-mean-token-mean":
        seq = seq / (seq_tokens + 1e-8)
    seq_mask = seq_tokens > 0
    return seq[seq_mask].sum() / seq_mask.sum()


def _cfg(mode):
    return CorrectionConfig(mode=mode, tis_cap=1.5, mis_low=0.7, mis_high=1.4, geo_delta=0.1)


@pytest.mark.parametrize("mode", MODES)
def test_weights_and_keep_match_verl(mode):
    _, old, rollout, mask, _ = _batch(2)
    cfg = _cfg(mode)
    w, keep, aux = mismatch_weights(old, rollout, mask, cfg)
    want_w, want_mask = verl_correction(old, rollout, mask, cfg)
    keep = np.asarray(keep)
    assert keep.dtype == bool and keep.shape == (B, T)
    np.testing.assert_array_equal(keep, want_mask > 0)
    want_w = np.ones((B, T)) if want_w is None else want_w
    np.testing.assert_allclose(np.asarray(w), np.where(keep, want_w, 0.0), rtol=1e-5)
    valid = mask > 0
    np.testing.assert_allclose(float(aux["is_reject_frac"]), (valid & ~keep).sum() / valid.sum())
    np.testing.assert_allclose(float(aux["is_zero_frac"]), float(aux["is_reject_frac"]))
    np.testing.assert_allclose(float(aux["is_weight_mean"]), want_w[keep].mean(), rtol=1e-5)
    rho = np.exp(old - rollout)
    np.testing.assert_allclose(float(aux["tis_trunc_frac"]), (rho[valid] > 1.5).mean())
    if mode in ("none", "token_tis", "seq_tis"):
        np.testing.assert_array_equal(keep, valid)
    if mode in ("token_mis", "seq_mis", "geo_reject"):
        assert 0 < (valid & ~keep).sum() < valid.sum(), "the batch should exercise rejection"


@pytest.mark.parametrize("agg", AGGREGATIONS)
@pytest.mark.parametrize("mode", MODES)
def test_ppo_loss_matches_verl(mode, agg):
    """Rejected tokens leave the loss denominator; kept ones carry verl's IS weight."""
    logp, old, rollout, mask, adv_B = _batch(2)
    cfg = _cfg(mode)
    w, keep, _ = mismatch_weights(old, rollout, mask, cfg)
    assert mode not in ("token_mis", "seq_mis", "geo_reject") or np.any((mask > 0) & ~keep)
    got, _ = ppo_policy_loss(logp, old, adv_B, keep, eps_low=0.2, eps_high=0.28,
                             dual_clip_c=3.0, is_weights=w, agg=agg)  # fmt: skip
    want_w, want_mask = verl_correction(old, rollout, mask, cfg)
    adv = np.broadcast_to(adv_B[:, None].astype(np.float64), (B, T))
    want = verl_policy_loss(old.astype(np.float64), logp.astype(np.float64), adv, want_mask,
                            0.8, 1.28, 3.0, want_w, agg)  # fmt: skip
    np.testing.assert_allclose(float(got), want, rtol=2e-5, atol=1e-7)


@pytest.mark.parametrize("mode", MODES)
def test_weights_stop_gradient_and_finite_at_extreme_log_ratios(mode):
    _, old, rollout, mask, _ = _batch(4)
    rollout = rollout.copy()
    rollout[1, 2], rollout[2, 3] = old[1, 2] - 100.0, old[2, 3] + 100.0  # log rho = +-100
    cfg = _cfg(mode)
    g = jax.grad(lambda o, r: jnp.sum(mismatch_weights(o, r, mask, cfg)[0]), argnums=(0, 1))
    for grad in g(old, rollout):
        np.testing.assert_array_equal(np.asarray(grad), 0.0)
    w, _, aux = mismatch_weights(old, rollout, mask, cfg)
    assert np.all(np.isfinite(np.asarray(w)))
    assert all(np.isfinite(float(v)) for v in aux.values())
    assert float(jnp.max(w)) <= np.exp(SAFETY_BOUND) * 1.0001


class JitVariantsTest(chex.TestCase):
    @chex.variants(with_jit=True, without_jit=True)
    def test_variants_agree(self):
        _, old, rollout, mask, _ = _batch(5)
        for mode in MODES:
            fn = self.variant(lambda o, r, m, mode=mode: mismatch_weights(o, r, m, _cfg(mode)))
            w, keep, _ = fn(old, rollout, mask)
            w0, keep0, _ = mismatch_weights(old, rollout, mask, _cfg(mode))
            np.testing.assert_array_equal(np.asarray(keep), np.asarray(keep0))
            np.testing.assert_allclose(np.asarray(w), np.asarray(w0), rtol=1e-6)


@settings(max_examples=25, deadline=None)
@given(mode=st.sampled_from(MODES), seed=st.integers(0, 2**16), noise=st.floats(0.0, 2.0))
def test_property_keep_within_mask_and_weights_positive_on_keep(mode, seed, noise):
    _, old, rollout, mask, _ = _batch(seed, noise)
    w, keep, aux = mismatch_weights(old, rollout, mask, _cfg(mode))
    w, keep, valid = np.asarray(w), np.asarray(keep), mask > 0
    assert not np.any(keep & ~valid)
    assert np.all(w[keep] > 0) and np.all(w[~keep] == 0)
    np.testing.assert_allclose(float(aux["is_reject_frac"]), 1 - keep.sum() / valid.sum())


def test_config_validation():
    with pytest.raises(ValueError, match="mode"):
        CorrectionConfig(mode="tis")
    with pytest.raises(ValueError, match="mis_low"):
        CorrectionConfig(mis_low=2.0, mis_high=1.0)
