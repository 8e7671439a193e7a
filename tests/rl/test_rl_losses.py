"""ppo_policy_loss against loop-based NumPy references (corrections: test_rl_corrections.py)."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from calclip_jax.rl.losses import AGGREGATIONS, ppo_policy_loss

B, T = 4, 6
LOWER, UPPER = 0.8, 1.28


def _batch(seed=0):
    rng = np.random.default_rng(seed)
    old = rng.uniform(-3.0, -0.1, (B, T)).astype(np.float32)
    logp = (old + rng.uniform(-1.5, 1.5, (B, T))).astype(np.float32)  # ratio in [0.22, 4.5]
    mask = (rng.random((B, T)) < 0.8).astype(np.float32)
    mask[0, :] = 0.0  # one empty sequence
    mask[1, 0] = 1.0
    adv_B = np.array([0.7, -1.2, 0.9, -0.4], np.float32)
    adv_BT = rng.normal(size=(B, T)).astype(np.float32)
    return logp, old, mask, adv_B, adv_BT


def ref_loss_and_grad(logp, old, adv_BT, mask, lower, upper, c, w, agg):
    """Per-token loops: value and d loss / d logp of the clipped loss."""
    val, dval = np.zeros((B, T)), np.zeros((B, T))
    for b in range(B):
        for t in range(T):
            if not mask[b, t]:
                continue
            a, r = float(adv_BT[b, t]), float(np.exp(logp[b, t] - old[b, t]))
            unclipped, clipped = -a * r, -a * min(max(r, lower), upper)
            v, d = (clipped, 0.0) if clipped > unclipped else (unclipped, -a * r)
            if c is not None and a < 0 and -c * a < v:
                v, d = -c * a, 0.0
            val[b, t], dval[b, t] = v * w[b, t], d * w[b, t]
    lengths = mask.sum(1)
    n_seq = max((lengths > 0).sum(), 1)
    if agg == "token-mean":
        coef = np.full((B, T), 1.0 / mask.sum())
    elif agg == "seq-mean-token-mean":
        coef = np.repeat((1.0 / np.maximum(lengths, 1) / n_seq)[:, None], T, 1)
    else:
        coef = np.full((B, T), 1.0 / n_seq)
    return (coef * val).sum(), coef * dval


@pytest.mark.parametrize("agg", AGGREGATIONS)
@pytest.mark.parametrize("dual_clip_c", [None, 3.0])
@pytest.mark.parametrize("per_token_adv", [False, True])
def test_loss_and_grad_match_reference(agg, dual_clip_c, per_token_adv):
    logp, old, mask, adv_B, adv_BT = _batch()
    adv = adv_BT if per_token_adv else adv_B
    adv_full = adv_BT if per_token_adv else np.repeat(adv_B[:, None], T, 1)
    w = np.random.default_rng(1).uniform(0.0, 2.0, (B, T)).astype(np.float32)
    for is_weights in (None, w):

        def f(lp, is_weights=is_weights):
            return ppo_policy_loss(
                lp,
                old,
                adv,
                mask,
                eps_low=1 - LOWER,
                eps_high=UPPER - 1,
                dual_clip_c=dual_clip_c,
                is_weights=is_weights,
                agg=agg,
            )[0]

        want, dwant = ref_loss_and_grad(
            logp,
            old,
            adv_full,
            mask,
            LOWER,
            UPPER,
            dual_clip_c,
            np.ones((B, T)) if is_weights is None else w,
            agg,
        )
        np.testing.assert_allclose(float(f(logp)), want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(jax.grad(f)(logp)), dwant, rtol=1e-5, atol=1e-6)


class ZeroGradientTest(chex.TestCase):
    """A<0 tokens below the lower bound get exactly zero gradient; other valid tokens do not."""

    @chex.variants(with_jit=True, without_jit=True)
    def test_zero_gradient_pattern(self):
        logp, old, mask, _, adv_BT = _batch(6)
        adv_BT[np.abs(adv_BT) < 0.05] = 0.5  # no (near-)zero advantages
        ratio = np.exp(logp - old)

        @self.variant
        def grad_fn(lp, lower, upper):  # bounds traced under jit
            def f(x):
                return ppo_policy_loss(
                    x,
                    old,
                    adv_BT,
                    mask,
                    eps_low=0.0,
                    eps_high=0.0,
                    bounds=(lower, upper),
                    dual_clip_c=3.0,
                )[0]

            return jax.grad(f)(lp)

        for lower, upper in ((0.8, 1.28), (0.6, 1.5)):
            g = np.asarray(grad_fn(logp, jnp.float32(lower), jnp.float32(upper)))
            valid = mask > 0
            neg_below = valid & (adv_BT < 0) & (ratio < lower)
            assert neg_below.any()
            assert np.all(g[neg_below] == 0.0)
            dead = neg_below | (valid & (adv_BT < 0) & (ratio > 3.0))
            dead |= valid & (adv_BT > 0) & (ratio > upper)
            alive = valid & ~dead
            assert alive.any() and np.all(g[alive] != 0.0)
            assert np.all(g[dead] == 0.0) and np.all(g[~valid] == 0.0)


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
def test_kl_term_value_and_grad(estimator):
    logp, old, mask, adv_B, _ = _batch(7)
    ref = (logp + np.random.default_rng(8).normal(0, 0.5, (B, T))).astype(np.float32)
    beta = 0.1

    def f(lp, with_kl=True):
        kw = {"ref_logp": ref, "kl_beta": beta, "kl_estimator": estimator} if with_kl else {}
        return ppo_policy_loss(lp, old, adv_B, mask, eps_low=0.2, eps_high=0.2, **kw)

    (loss, aux), (loss0, _) = f(logp), f(logp, with_kl=False)
    d = ref - logp
    kl, dkl = {
        "k1": (-d, np.ones_like(d)),
        "k2": (0.5 * d**2, -d),
        "k3": (np.exp(d) - d - 1, 1 - np.exp(d)),
    }[estimator]
    n = mask.sum()
    np.testing.assert_allclose(float(aux["kl_loss"]), (kl * mask).sum() / n, rtol=1e-5)
    np.testing.assert_allclose(float(loss - loss0), beta * (kl * mask).sum() / n, rtol=1e-4)
    g_kl = jax.grad(lambda x: f(x)[0])(logp) - jax.grad(lambda x: f(x, False)[0])(logp)
    np.testing.assert_allclose(np.asarray(g_kl), beta * dkl * mask / n, rtol=1e-4, atol=1e-7)


def test_masked_garbage_is_harmless():
    logp, old, mask, adv_B, _ = _batch(9)
    logp = np.where(mask > 0, logp, 500.0).astype(np.float32)  # exp(500) would overflow
    ref = np.where(mask > 0, logp, -500.0).astype(np.float32)

    def f(lp):
        return ppo_policy_loss(
            lp,
            old,
            adv_B,
            mask,
            eps_low=0.2,
            eps_high=0.2,
            ref_logp=ref,
            kl_beta=0.1,
            agg="seq-mean-token-mean",
        )[0]

    assert np.isfinite(float(f(logp)))
    assert np.all(np.isfinite(np.asarray(jax.grad(f)(logp))))
    with pytest.raises(ValueError, match="agg"):
        ppo_policy_loss(logp, old, adv_B, mask, eps_low=0.2, eps_high=0.2, agg="mean")
