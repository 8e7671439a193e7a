"""Distortion statistics on synthetic log-probs with known answers, and their tables / figure."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calclip_jax.analysis import distortion as D
from calclip_jax.analysis.ratio_noise import PROB_EDGES, noise_by_probability
from calclip_jax.reports import distortion_report as report

BOUNDS = (0.8, 1.2)
B, T, K = 8, 12, 3


def _batch(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """mask [B, T] (a few padded tokens), advantages [B] (4 negative, 3 positive, one 0),
    BF16 old log-probs [B, T] over all probability bins, and log-probs [K + 1, B, T] that move
    with k."""
    rng = np.random.default_rng(seed)
    mask = np.ones((B, T), bool)
    mask[:, -2:] = rng.random((B, 2)) < 0.5
    adv = np.array([-1.0, -0.5, -2.0, -1.0, 0.7, 1.0, 0.3, 0.0])
    old = np.log(rng.uniform(0.001, 1.0, (B, T)))
    steps = rng.normal(0.0, 0.3, (K, B, T)).cumsum(axis=0)
    logp = np.concatenate([old[None], old[None] + steps])
    return mask, adv, old, logp


def _stats(offset_BT: np.ndarray | None = None, old_offset_BT: np.ndarray | None = None):
    """bf16 as in `_batch`; "fp8" = bf16 + offset at every theta (or at theta_0 only)."""
    mask, adv, old, logp = _batch()
    off = np.zeros((B, T)) if offset_BT is None else offset_BT
    off0 = off if old_offset_BT is None else old_offset_BT
    fp8_logp = logp + off[None]
    fp8_logp[0] = old + off0
    return D.distortion_stats(
        {"bf16": old, "fp8": old + off0},
        {"bf16": logp, "fp8": fp8_logp},
        mask,
        adv,
        BOUNDS,
    )


def test_identical_logprobs_give_zero_noise_and_equal_clip_shares():
    stats = _stats()
    fp8 = stats["precisions"]["fp8"]
    assert set(stats["precisions"]) == {"fp8"}  # the reference is not compared with itself
    assert stats["unit_ratio_gap"] == {"bf16": 0.0, "fp8": 0.0}
    noise = fp8["logp_noise"]
    assert noise["std"] == {"neg": 0.0, "pos": 0.0}
    assert noise["p99_abs"] == {"neg": 0.0, "pos": 0.0}
    assert noise["share_over_width"] == {"neg": 0.0, "pos": 0.0, "all": 0.0}
    assert [u["k"] for u in fp8["updates"]] == [1, 2, 3]
    for u in fp8["updates"]:
        assert u["ratio_noise"]["std"] == {"neg": 0.0, "pos": 0.0}
        c = u["clip"]
        assert c["lower_neg"] == c["lower_neg_ref"] and c["upper_pos"] == c["upper_pos_ref"]
        assert c["lower_neg_by_bin"] == c["lower_neg_ref_by_bin"]
        assert c["lower_neg_inflation"] in (1.0, None)
    # the updates moved the ratio: some tokens are clipped at the last k
    assert fp8["updates"][-1]["clip"]["lower_neg"] > 0
    assert stats["update_size"][-1]["neg"] > stats["update_size"][0]["neg"] > 0


def test_offset_on_negative_tokens_shows_only_there():
    mask, adv, _, _ = _batch()
    rng = np.random.default_rng(1)
    offset = np.where(adv[:, None] < 0, rng.normal(0.0, 0.3, (B, T)), 0.0)
    # noise only at theta_k >= 1 (old log-probs identical): ratio noise d = offset on A<0
    stats = _stats(offset_BT=offset, old_offset_BT=np.zeros((B, T)))
    fp8 = stats["precisions"]["fp8"]
    assert fp8["logp_noise"]["std"] == {"neg": 0.0, "pos": 0.0}
    valid_neg = mask & (adv[:, None] < 0)
    for u in fp8["updates"]:
        std = u["ratio_noise"]["std"]
        assert std["pos"] == 0.0
        assert std["neg"] == pytest.approx(offset[valid_neg].std())
        assert all(s == 0.0 or math.isnan(s) for s in u["ratio_noise"]["std_by_bin"]["pos"])
        assert u["clip"]["upper_pos"] == u["clip"]["upper_pos_ref"]
    # the same offset at theta_0 only: log-prob noise on A<0, ratio noise -offset
    stats = _stats(offset_BT=np.zeros((B, T)), old_offset_BT=offset)
    noise = stats["precisions"]["fp8"]["logp_noise"]
    assert noise["std"]["pos"] == 0.0 and noise["std"]["neg"] == pytest.approx(
        offset[valid_neg].std()
    )
    abs_neg = np.abs(offset[valid_neg])
    assert noise["p99_abs"]["neg"] == pytest.approx(np.percentile(abs_neg, 99))
    share = np.mean(abs_neg > D.CLIP_WIDTH)
    assert noise["share_over_width"]["neg"] == pytest.approx(share)
    assert noise["share_over_width"]["all"] == pytest.approx(abs_neg.size * share / mask.sum())


def test_planted_offset_inflates_lower_clip_share():
    mask, adv, _, _ = _batch()
    down = np.where(adv[:, None] < 0, math.log(0.5), 0.0)  # every A<0 ratio halved
    clip = _stats(offset_BT=down, old_offset_BT=np.zeros((B, T)))["precisions"]["fp8"]
    for u in clip["updates"]:
        c = u["clip"]
        assert c["lower_neg"] > c["lower_neg_ref"]
        assert c["lower_neg_inflation"] is None or c["lower_neg_inflation"] > 1
    # by hand at k = 1
    _, _, old, logp = _batch()
    neg = mask & (adv[:, None] < 0)
    log_r = (logp[1] - old)[neg]
    assert clip["updates"][0]["clip"]["lower_neg"] == pytest.approx(
        np.mean(log_r + math.log(0.5) < math.log(0.8))
    )
    assert clip["updates"][0]["clip"]["lower_neg_ref"] == pytest.approx(
        np.mean(log_r < math.log(0.8))
    )


def test_bin_counts_add_up():
    mask, adv, old, _ = _batch()
    stats = _stats()
    t = stats["tokens"]
    assert t["total"] == mask.sum() == t["neg"] + t["pos"] + t["zero"]
    assert t["zero"] == mask[adv == 0].sum()
    for tag in D.SIGNS:
        assert len(t["by_bin"][tag]) == len(PROB_EDGES) - 1
        assert sum(t["by_bin"][tag]) == t[tag]
    # the bins are noise_by_probability's, and so is the std
    tokens = D.Tokens.of(mask, adv, old)
    d = np.random.default_rng(2).normal(0, 0.1, tokens.advantages.size)
    ref = noise_by_probability(
        {"noise": d, "advantages": tokens.advantages, "old_prob": tokens.old_prob}
    )
    ours = D.by_sign_and_bin(d, tokens, D.std)
    np.testing.assert_allclose(ours["neg"], ref["std_neg"])
    np.testing.assert_allclose(ours["pos"], ref["std_pos"])
    np.testing.assert_array_equal(t["by_bin"]["neg"], ref["n_neg"])


def test_token_advantages_and_empty_groups():
    mask = np.array([[True, True, False]])
    adv_BT = np.array([[-1.0, 1.0, -5.0]])
    tokens = D.Tokens.of(mask, adv_BT, np.log([[0.5, 0.5, 0.5]]))
    np.testing.assert_array_equal(tokens.advantages, [-1.0, 1.0])
    # the neg token sits in the 0.5-0.9 bin, every other bin is empty: NaN std, 0 counts
    by_bin = D.by_sign_and_bin(np.array([0.1, 0.2]), tokens, D.std)
    assert by_bin["neg"][3] == 0.0 and all(
        math.isnan(x) for i, x in enumerate(by_bin["neg"]) if i != 3
    )
    assert D.inflation(0.1, 0.0) is None and D.inflation(0.2, 0.1) == pytest.approx(2.0)
    assert D.p99_abs(np.array([])) != D.p99_abs(np.array([]))  # NaN


def test_unit_ratio_gap_sees_a_changed_forward():
    mask, adv, old, _ = _batch()
    tokens = D.Tokens.of(mask, adv, old)
    assert D.unit_ratio_gap(old, old.copy(), tokens) == 0.0
    other = old.copy()
    other[0, 0] += 1e-3
    assert D.unit_ratio_gap(old, other, tokens) == pytest.approx(1e-3)


def test_tables_and_figure(tmp_path):
    _, adv, _, _ = _batch()
    offset = np.where(adv[:, None] < 0, 0.2, -0.05)
    stats = _stats(offset_BT=offset)
    md = report.to_markdown(stats, BOUNDS, D.CLIP_WIDTH)
    assert "| fp8 | 1 |" in md and "p < 0.05" in md and ">= 0.99" in md
    assert md.count("\n| fp8 |") == 4 + K  # noise, noise by bin, d per k, d by bin, K clip rows
    assert report.bin_labels((0.0, 0.5, 1.0)) == ["p < 0.5", "0.5-1"]
    fig = report.plot_distortion(stats, save=tmp_path / "d.png")
    assert (tmp_path / "d.png").stat().st_size > 0
    report.plots.plt.close(fig)
