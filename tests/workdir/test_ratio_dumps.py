"""Ratio dumps: loading (advantage broadcast, step order), pooling and the noise statistics."""

from __future__ import annotations

import numpy as np
import pytest

from calclip_jax.analysis import noise_by_probability, pooled_tokens
from calclip_jax.workdir import dump_steps, load_dump, load_dumps


def _write(workdir, step, ratio, ratio_ref, adv, mask, prob):
    (workdir / "ratios").mkdir(parents=True, exist_ok=True)
    np.savez(
        workdir / "ratios" / f"step_{step:06d}.npz",
        ratio=np.asarray(ratio, np.float32),
        ratio_ref=np.asarray(ratio_ref, np.float32),
        advantages=np.asarray(adv, np.float32),
        mask=np.asarray(mask, bool),
        old_prob=np.asarray(prob, np.float32),
    )


def test_load_pool_and_noise(tmp_path):
    # step 20: sequence advantages [B]; step 10: token advantages [B, T]; one masked-out token
    _write(tmp_path, 20, [[2.0, 1.0]], [[1.0, 1.0]], [1.0], [[1, 1]], [[0.1, 0.95]])
    _write(tmp_path, 10, [[0.5, 9.0]], [[1.0, 1.0]], [[-1.0, -1.0]], [[1, 0]], [[0.1, 0.1]])
    assert list(dump_steps(tmp_path)) == [10, 20]
    assert list(dump_steps(tmp_path, last_step=19)) == [10] == list(dump_steps(tmp_path, 10))
    assert load_dump(tmp_path / "ratios" / "step_000020.npz")["advantages"].shape == (1, 2)
    tokens = pooled_tokens(load_dumps(tmp_path))
    np.testing.assert_allclose(tokens["ratio"], [0.5, 2.0, 1.0])  # step order, mask applied
    np.testing.assert_allclose(tokens["noise"], np.log([0.5, 2.0, 1.0]), rtol=1e-6)
    stats = noise_by_probability(tokens, edges=(0.0, 0.5, 1.0001))
    np.testing.assert_array_equal(stats["n_neg"], [1, 0])
    np.testing.assert_array_equal(stats["n_pos"], [1, 1])
    assert stats["std_neg"][0] == 0.0 and np.isnan(stats["std_neg"][1])


def test_noise_std_matches_plain_computation():
    rng = np.random.default_rng(0)
    n = 500
    tokens = {
        "noise": rng.normal(0, 0.1, n),
        "advantages": rng.choice([-1.0, 1.0], n),
        "old_prob": rng.uniform(0, 1, n),
    }
    stats = noise_by_probability(tokens, edges=(0.0, 0.3, 1.0001))
    sel = (tokens["advantages"] < 0) & (tokens["old_prob"] >= 0.3)
    assert stats["std_neg"][1] == pytest.approx(tokens["noise"][sel].std())
    assert stats["n_neg"].sum() + stats["n_pos"].sum() == n


def test_dump_without_required_arrays_is_rejected(tmp_path):
    np.savez(tmp_path / "bad.npz", ratio=np.ones((1, 2)))
    with pytest.raises(ValueError, match="lacks"):
        load_dump(tmp_path / "bad.npz")
    assert dump_steps(tmp_path / "no_run") == {}
