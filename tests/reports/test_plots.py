"""Plots return Figures with the data drawn, surge marked, and save PNGs headless."""

import subprocess
import sys

import matplotlib
import numpy as np
import pytest
from run_fixtures import make_run

from calclip_jax.reports import plots
from calclip_jax.reports.paired_arms import by_run_name, load_seeded_runs

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
        assert labels == ["surging", "_surge", "flat"]  # the surge line: no legend entry
        assert ax_entropy.lines[1].get_xdata()[0] == 7 and "surge" in ax_entropy.get_title()
        assert [t.get_text() for t in ax_entropy.get_legend().get_texts()] == ["surging", "flat"]
        np.testing.assert_array_equal(ax_eval.lines[0].get_xdata(), [4])  # NaN steps skipped
    finally:
        plt.close(fig)


def _legend_texts(fig) -> list[str]:
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    return [t.get_text() for legend in legends for t in legend.get_texts()]


def test_twenty_arms_distinct_colours_one_legend_entry_each():
    arms = [f"arm{i}" for i in range(20)]
    colours = plots.arm_colors(arms)
    assert len({tuple(np.round(c, 4)) for c in colours.values()}) == 20
    many = plots.arm_colors([str(i) for i in range(45)])
    assert len({tuple(np.round(c, 4)) for c in many.values()}) == 45
    runs = {a: {"step": np.arange(1, 4), "entropy": np.ones(3) * i} for i, a in enumerate(arms)}
    fig = plots.plot_curves(runs, keys=("entropy", "reward_mean"))
    try:
        assert _legend_texts(fig) == arms
        drawn = {tuple(np.round(matplotlib.colors.to_rgba(ln.get_color()), 4))
                 for ln in fig.axes[0].lines}  # fmt: skip
        assert len(drawn) == 20
    finally:
        plt.close(fig)


def test_seeds_of_an_arm_are_one_line_with_a_min_max_band():
    steps = np.arange(1, 5)
    runs = {
        "a": {"step": steps, "entropy": np.array([1.0, 1.0, 1.0, 1.0])},
        "a__seed1": {"step": steps, "entropy": np.array([3.0, 3.0, np.nan, 3.0])},
        "a__seed2": {"step": steps[:3], "entropy": np.array([2.0, 5.0, 2.0])},
        "b": {"step": steps, "entropy": np.zeros(4)},
    }
    fig = plots.plot_curves(runs, keys=("entropy", "reward_mean"))
    try:
        assert _legend_texts(fig) == ["a (3 seeds to step 3, 2 to 4)", "b"]  # a__seed2 ends at 3
        ax = fig.axes[0]
        mean_a = ax.lines[0]
        np.testing.assert_allclose(mean_a.get_ydata(), [2.0, 3.0, 1.5, 2.0])
        (band,) = ax.collections  # only the seeded arm has a band
        lo_hi = band.get_paths()[0].vertices[:, 1]
        assert lo_hi.min() == 1.0 and lo_hi.max() == 5.0
    finally:
        plt.close(fig)


def test_a_seeds_label_says_how_many_seeds_reach_each_end():
    assert plots.seeds_label("a", [100]) == "a"
    assert plots.seeds_label("a", [80, 80, 80]) == "a (3 seeds)"
    assert plots.seeds_label("a", [100, 80, 80]) == "a (3 seeds to step 80, 1 to 100)"
    assert plots.seeds_label("a", [60, 100, 80]) == "a (3 seeds to step 60, 2 to 80, 1 to 100)"


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


def test_paired_report_draws_a_sweeps_dynamics_with_seeds_banded(tmp_path):
    rows = [{"step": t, **{k: 0.1 * t for k in plots.DYNAMICS_KEYS}} for t in range(1, 5)]
    for name in ("bf16__seed0", "bf16__seed1", "fp8__seed0"):
        make_run(tmp_path / "sweep" / name, rows)
    runs = load_seeded_runs(tmp_path / "sweep")
    assert sorted(by_run_name(runs)) == ["bf16__seed0", "bf16__seed1", "fp8__seed0"]
    fig = plots.plot_curves(by_run_name(runs), keys=plots.DYNAMICS_KEYS)
    try:
        assert _legend_texts(fig) == ["bf16 (2 seeds)", "fp8"]
        assert [ax.get_title() for ax in fig.axes[:6]] == list(plots.DYNAMICS_KEYS)
    finally:
        plt.close(fig)
    out = tmp_path / "dynamics.png"
    cmd = [sys.executable, "-m", "experiments.paired_report", f"--sweep={tmp_path / 'sweep'}"]
    cmd += ["--n_boot=50", f"--curves_figure={out}"]
    subprocess.run(cmd, capture_output=True, text=True, check=True)
    assert out.read_bytes().startswith(b"\x89PNG")
