"""GRPO advantages, DAPO dynamic sampling / overlong shaping, presets."""

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

from calclip_jax.rl.advantages import (
    dynamic_sampling_keep,
    grpo_advantages,
    overlong_penalty,
    overlong_shaped_rewards,
)
from calclip_jax.rl.losses import ppo_policy_loss
from calclip_jax.rl.presets import RLPreset, get_preset


@pytest.mark.parametrize("normalize_std", [True, False])
@pytest.mark.parametrize("ddof", [0, 1])
def test_grpo_advantages_match_numpy(normalize_std, ddof):
    rewards = np.array([1.0, 0.0, 0.5, 0.0, 2.0, 2.0, 2.0, 2.0, 3.0, -1.0, 0.0, 1.0], np.float32)
    got = np.asarray(grpo_advantages(rewards, 4, normalize_std=normalize_std, eps=1e-3, ddof=ddof))
    groups = rewards.reshape(3, 4)
    want = groups - groups.mean(1, keepdims=True)
    if normalize_std:
        want = want / (groups.std(1, ddof=ddof, keepdims=True) + 1e-3)
    np.testing.assert_allclose(got, want.reshape(-1), rtol=1e-5, atol=1e-6)
    assert np.all(got[4:8] == 0.0)  # equal rewards -> zero advantage, no NaN


def test_grpo_advantages_shape_check_and_group_of_one():
    with pytest.raises(ValueError, match="expected shape"):
        grpo_advantages(jnp.zeros(7), 4)
    assert np.all(np.asarray(grpo_advantages(jnp.arange(3.0), 1)) == 0.0)


def test_dynamic_sampling_keep_on_correctness():
    """DAPO: keep groups with 0 < #correct < G (partial credit does not count as correct)."""
    correct = np.array([[1, 1, 0], [0, 0, 0], [1, 1, 1], [0, 0, 1]], bool).ravel()
    np.testing.assert_array_equal(
        np.asarray(dynamic_sampling_keep(correct, 3)), [True] * 3 + [False] * 6 + [True] * 3
    )
    np.testing.assert_array_equal(np.asarray(dynamic_sampling_keep(jnp.array([0, 1]), 2)), True)
    with pytest.raises(TypeError, match="bool"):  # rewards are not correctness
        dynamic_sampling_keep(jnp.array([1.0, 0.5, 0.0]), 3)


def test_overlong_penalty_piecewise():
    lengths = jnp.array([0, 12, 13, 14, 16, 17, 100])
    got = np.asarray(overlong_penalty(lengths, max_len=16, cache_len=4))
    np.testing.assert_allclose(got, [0, 0, -0.25, -0.5, -1.0, -1.0, -1.0])
    shaped = overlong_shaped_rewards(jnp.ones(7), lengths, max_len=16, cache_len=4)
    np.testing.assert_allclose(np.asarray(shaped), 1.0 + got)
    with pytest.raises(ValueError):
        overlong_penalty(lengths, max_len=4, cache_len=8)


def test_presets():
    dapo, grpo = get_preset("dapo"), get_preset("grpo")
    assert (dapo.agg, dapo.eps_low, dapo.eps_high, dapo.kl_beta) == ("token-mean", 0.2, 0.28, 0.0)
    assert dapo.dynamic_sampling and dapo.overlong_shaping
    assert (grpo.agg, grpo.eps_low, grpo.eps_high, grpo.kl_beta) == (
        "seq-mean-token-mean",
        0.2,
        0.2,
        0.04,
    )
    assert not grpo.dynamic_sampling and not grpo.overlong_shaping
    assert RLPreset.from_dict(dapo.to_dict()) == dapo
    assert dataclasses.replace(grpo, kl_beta=0.0).kl_beta == 0.0
    with pytest.raises(ValueError, match="agg"):
        RLPreset(name="x", agg="mean")
    with pytest.raises(ValueError, match="preset"):
        get_preset("ppo")
    logp = jnp.zeros((2, 3))
    for preset in (dapo, grpo):
        loss, _ = ppo_policy_loss(
            logp,
            logp,
            jnp.array([1.0, -1.0]),
            jnp.ones((2, 3)),
            ref_logp=logp,
            **preset.loss_kwargs(),
        )
        assert np.isfinite(float(loss))
