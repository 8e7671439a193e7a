"""Plots return Figures with the data drawn, surge marked, and save PNGs headless."""

import matplotlib
import numpy as np
import pytest
from analysis_testutil import make_run

from calclip_jax.analysis import plots

plt = pytest.importorskip("matplotlib.pyplot")


def test_curves_mark_the_surge_and_skip_missing_points(tmp_path):
    surge = make_run(
        tmp_path / "a",
        [
            {
                "step": s,
                "entropy": e,
                "reward_mean": 0.1 * s,
                "eval_accuracy": 0.5 if s == 4 else None,
            }
            for s, e in enumerate([2.0, 1.0, 0.9, 0.8, 0.8, 0.8, 1.5], start=1)
        ],
    )
    flat = {"step": np.arange(1, 8), "entropy": np.ones(7)}
    png = tmp_path / "curves.png"
    fig = plots.plot_curves({"surging": surge, "flat": flat}, surge_window=1, save=png)
    try:
        assert png.stat().st_size > 0
        ax_entropy, _, ax_eval, _ = fig.axes
        labels = [line.get_label() for line in ax_entropy.lines]
        assert labels == ["surging", "surging surge@7", "flat"]
        np.testing.assert_array_equal(ax_eval.lines[0].get_xdata(), [4])  # NaN steps skipped
    finally:
        plt.close(fig)


def test_clip_fraction_bars_fp8_vs_shadow(tmp_path):
    rows = [
        {
            "arm": "t0",
            "train_precision": "fp8_tensor",
            "clip_frac_lower_neg": 0.03,
            "clip_frac_lower_neg_ref": 0.01,
            "clip_frac_upper_pos": 0.02,
            "clip_frac_upper_pos_ref": 0.01,
        },
        {
            "arm": "t1",
            "train_precision": "fp8_tensor",
            "clip_frac_lower_neg": 0.05,
            "clip_frac_lower_neg_ref": 0.01,
            "clip_frac_upper_pos": 0.02,
            "clip_frac_upper_pos_ref": 0.01,
        },
        {
            "arm": "mx",
            "train_precision": "fp8_mx",
            "clip_frac_lower_neg": 0.02,
            "clip_frac_lower_neg_ref": 0.015,
            "clip_frac_upper_pos": 0.01,
            "clip_frac_upper_pos_ref": None,
        },
    ]
    fig = plots.plot_clip_fractions(rows)
    try:
        lower, upper = fig.axes
        assert [t.get_text() for t in lower.get_xticklabels()] == ["tensor", "mx"]
        heights = [p.get_height() for p in lower.patches]
        np.testing.assert_allclose(heights, [0.04, 0.02, 0.01, 0.015])  # FP8 bars, then shadow
        assert [t.get_text() for t in upper.get_xticklabels()] == ["tensor"]
    finally:
        plt.close(fig)


def test_metric_bars_and_headless_backend():
    fig = plots.plot_metric_bars([{"arm": "a", "x": 1.0}, {"arm": "b", "x": None}], "x")
    try:
        assert fig.axes[0].patches[0].get_height() == 1.0
        assert np.isnan(fig.axes[0].patches[1].get_height())
    finally:
        plt.close(fig)
    assert matplotlib.get_backend().lower() in ("agg", "module://matplotlib_inline.backend_inline")
