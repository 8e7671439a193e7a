"""Paired tables of a seeded sweep (calclip_jax.reports.paired_arms, experiments.paired_report)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from calclip_jax.analysis.paired import FEW_SEEDS, seed_mean_interval
from calclip_jax.reports.paired_arms import (
    bound_rows,
    carry_forward,
    load_seeded_runs,
    paired_report,
    paired_rows,
    shadow_rows,
    step_matrix,
)
from calclip_jax.workdir.run_record import METRICS_FILE, metrics_line
from calclip_jax.workdir.seed_names import seeded_name, split_seeded_name

STEPS = 12


def _write_run(folder: Path, rows: list[dict]) -> None:
    folder.mkdir(parents=True)
    (folder / METRICS_FILE).write_text("".join(metrics_line(r) for r in rows))


def _sweep(tmp_path: Path, fp8_reward_gap: float = 0.1) -> Path:
    """bf16 and fp8 arms at seeds 1, 2: fp8's reward is bf16's (per step) minus the gap; the fp8
    arm clips 3x its shadow's share on A<0 tokens."""
    rng = np.random.default_rng(0)
    for seed in (1, 2):
        prompts = rng.uniform(0.2, 0.8, STEPS)  # per-step difficulty shared by the arms
        bf16 = [{"step": t + 1, "reward_mean": p, "entropy": 0.5} for t, p in enumerate(prompts)]
        for row in bf16[4::5]:  # greedy evaluations at steps 5 and 10
            row["eval_accuracy"] = 0.5
        fp8 = [
            {
                "step": t + 1,
                "reward_mean": p - fp8_reward_gap,
                "entropy": 0.6,
                "clip_frac_lower_neg": 0.03,
                "clip_frac_lower_neg_ref": 0.01,
                **({"eval_accuracy": 0.4} if t % 5 == 4 else {}),
            }
            for t, p in enumerate(prompts)
        ]
        _write_run(tmp_path / f"bf16__seed{seed}", bf16)
        _write_run(tmp_path / f"fp8__seed{seed}", fp8)
    return tmp_path


def test_runs_group_by_arm_and_seed_and_align_on_steps(tmp_path):
    _write_run(tmp_path / "solo", [{"step": 2, "reward_mean": 1.0}])
    runs = load_seeded_runs(_sweep(tmp_path / "sweep"))
    assert {a: sorted(s) for a, s in runs.items()} == {"bf16": [1, 2], "fp8": [1, 2]}
    assert list(load_seeded_runs(tmp_path)) == ["solo"]  # no suffix: seed 0
    x = step_matrix(load_seeded_runs(tmp_path)["solo"], [0], "reward_mean", 3)
    np.testing.assert_array_equal(x, [[np.nan, 1.0, np.nan]])


def test_pairing_removes_the_shared_prompt_difficulty(tmp_path):
    runs = load_seeded_runs(_sweep(tmp_path))
    rows = {r[1]: r for r in paired_rows(runs, "bf16", n_boot=200)}
    # per-step prompts vary by +-0.3, yet the paired interval is exact: -10 points
    assert rows["reward (2nd half)"][2] == "-10 [-10, -10]"
    assert rows["reward (2nd half)"][3] == "-10 [-10, -10]"  # two seeds' means, both -10
    assert rows["reward (2nd half)"][4] == "1: -10, 2: -10"  # each seed's own difference
    assert rows["reward (2nd half)"][5] == f"2 x {STEPS} (12)"  # 6 steps of the 2nd half each
    # evaluations at steps 5 and 10: only step 10 lies in the 2nd half, one value per seed
    assert rows["eval accuracy (2nd half)"][2] == "-10 [-10, -10]"
    assert rows["eval accuracy (2nd half)"][5] == f"2 x {STEPS} (2)"
    assert rows["entropy"][2].startswith("0.1 [")
    assert "gradient norm" not in rows  # not logged: no row


def test_a_seed_cut_short_keeps_the_other_seeds_steps(tmp_path):
    """Seed 2 stops at step 8: seed 1 still pairs over its 12 steps and its own second half (7-12),
    seed 2 over its second half (5-8); cutting both to 8 would read seed 1's steps 5-8 instead."""
    for seed, steps, gap in ((1, STEPS, 0.1), (2, 8, 0.2)):
        half = steps // 2
        gaps = [0.5 if t < half else gap for t in range(steps)]  # the first half differs
        _write_run(tmp_path / f"bf16__seed{seed}", [{"step": t + 1, "reward_mean": 0.7}
                                                    for t in range(steps)])  # fmt: skip
        _write_run(
            tmp_path / f"fp8__seed{seed}",
            [{"step": t + 1, "reward_mean": 0.7 - g, "clip_frac_lower_neg": 0.02,
              "clip_frac_lower_neg_ref": 0.01 if t < 8 else 0.02} for t, g in enumerate(gaps)],
        )  # fmt: skip
    runs = load_seeded_runs(tmp_path)
    reward = {r[1]: r for r in paired_rows(runs, "bf16", n_boot=200)}["reward (2nd half)"]
    assert reward[4] == "1: -10, 2: -20"
    assert reward[5] == f"2 x {STEPS}/8 (10)"  # 6 + 4 paired steps
    assert reward[2].startswith("-15 [")  # each seed weighs the same
    # over the two seeds' means: -15 +- t(0.9, 1) * sd / sqrt(2), sd = 5 sqrt(2), t = tan(0.45 pi)
    half = math.tan(0.45 * math.pi) * 5.0
    assert reward[3] == f"-15 [{-15 - half:.3g}, {-15 + half:.3g}]"
    # the shadow multiplier reads seed 1's steps 9-12 too: 2x at 1-8, 1x at 9-12
    ((*_, per_seed),) = shadow_rows(runs, n_boot=200)
    assert per_seed == f"1: {0.02 * 12 / (0.01 * 8 + 0.02 * 4):.3g}, 2: 2"


def test_the_seed_mean_interval_stands_beside_the_bootstrap_up_to_few_seeds(tmp_path):
    """One seed has none; 2..FEW_SEEDS seeds have it; more seeds leave the cell empty."""
    for seed in range(FEW_SEEDS + 1):
        for arm, gap in (("bf16", 0.0), ("fp8", 0.1 + 0.01 * seed)):
            rows = [{"step": t + 1, "reward_mean": 0.7 - gap} for t in range(STEPS)]
            _write_run(tmp_path / f"{arm}__seed{seed}", rows)
    runs = load_seeded_runs(tmp_path)

    def cell(seeds: range | list[int]) -> str:
        some = {arm: {s: runs[arm][s] for s in seeds} for arm in runs}
        return paired_rows(some, "bf16", n_boot=50)[0][3]

    assert cell([0]) == "one seed: none"
    gaps = 100 * (0.1 + 0.01 * np.arange(FEW_SEEDS))
    assert cell(range(FEW_SEEDS)) == seed_mean_interval(-gaps).fmt()
    assert cell(range(FEW_SEEDS + 1)) == ""
    text = paired_report(runs, "bf16", n_boot=50)
    assert "| arm - baseline [90%] | over seed means [90% t] | per seed |" in text


def test_the_shadow_multiplier_divides_metrics_of_one_run(tmp_path):
    rows = shadow_rows(load_seeded_runs(_sweep(tmp_path)), n_boot=200)
    assert [r[:2] for r in rows] == [["fp8", "A<0 below the lower bound"]]
    assert rows[0][4] == "3x [3, 3]" and rows[0][5] == "1: 3, 2: 3"


def test_calibrated_bounds_report_their_floor_and_cap_hit_rates(tmp_path):
    """Calibrations log floor / cap hits where they run (NaN elsewhere): the share counts them."""
    rows = [
        {
            "step": t + 1,
            "clip_lower": 0.6,
            "clip_upper": 1.4,
            "calib_lower_floored": float(t % 4 == 0) if t % 2 == 0 else float("nan"),
            "calib_upper_capped": 1.0 if t % 2 == 0 else float("nan"),
        }
        for t in range(STEPS)
    ]
    _write_run(tmp_path / "calib__seed1", rows)
    _write_run(tmp_path / "tis__seed1", [{"step": 1, "clip_lower": 0.8}])
    got = {r[1]: r[2] for r in bound_rows(load_seeded_runs(tmp_path), n_boot=200)}
    assert got["lower bound in use"] == "0.6 [0.6, 0.6]"
    assert got["calibrations capped (upper_max) %"] == "100 [100, 100]"
    assert got["calibrations floored (lower_min) %"].startswith("50 [")  # 3 of 6 calibrations
    # floored and capped at steps 1, 5, 9 (t = 0, 4, 8), each held for 2 steps: 6 of 12 steps
    assert got["RL steps on the floor and the cap %"].startswith("50 [")
    assert all(r[0] == "calib" for r in bound_rows(load_seeded_runs(tmp_path), n_boot=50))
    # a calibration every 8 steps: floored and capped at step 1, not floored at step 9, so half
    # the calibrations but 8 of the 12 steps ran on both
    sparse = [{"step": t + 1, "clip_lower": 0.6 if t < 8 else 0.7} for t in range(STEPS)]
    for t, floored in ((0, 1.0), (8, 0.0)):
        sparse[t] |= {"calib_lower_floored": floored, "calib_upper_capped": 1.0}
    _write_run(tmp_path / "k8__seed1", sparse)
    got = {r[1]: r[2] for r in bound_rows(load_seeded_runs(tmp_path), n_boot=200) if r[0] == "k8"}
    assert got["calibrations floored (lower_min) %"].startswith("50 [")
    assert got["RL steps on the floor and the cap %"].startswith("66.7 [")


def test_a_calibration_is_carried_to_the_steps_that_ran_on_it():
    x = np.array([[np.nan, 1.0, np.nan, 0.0, np.nan], [0.0, np.nan, np.nan, np.nan, np.nan]])
    got = carry_forward(x, [5, 3])
    np.testing.assert_array_equal(got[0], [np.nan, 1, 1, 0, 0])
    np.testing.assert_array_equal(got[1], [0, 0, 0, np.nan, np.nan])  # not past its end
    assert np.isnan(x[0, 2])  # the input is left alone


def test_cli_prints_and_writes_the_tables_and_names_a_missing_baseline(tmp_path):
    sweep, out = _sweep(tmp_path / "sweep"), tmp_path / "paired.md"
    cmd = [sys.executable, "-m", "experiments.paired_report", f"--sweep={sweep}", "--n_boot=100"]
    fig = tmp_path / "paired.png"
    done = subprocess.run(
        [*cmd, f"--out={out}", f"--figure={fig}"], capture_output=True, text=True, check=True
    )
    assert fig.read_bytes().startswith(b"\x89PNG")
    assert "| fp8 | reward (2nd half) | -10 [-10, -10] |" in done.stdout
    assert out.read_text().strip() == done.stdout.strip()
    bad = subprocess.run([*cmd, "--baseline=fp32"], capture_output=True, text=True)
    assert bad.returncode != 0 and "baseline arm 'fp32' not among the runs" in bad.stderr


def test_report_refuses_an_unknown_baseline(tmp_path):
    with pytest.raises(ValueError, match="not among the runs"):
        paired_report(load_seeded_runs(_sweep(tmp_path)), "nope")


def test_seeded_names_round_trip():
    assert split_seeded_name(seeded_name("fp8_tensor_tis", 3)) == ("fp8_tensor_tis", 3)
    assert split_seeded_name(seeded_name("a__seedx", -1)) == ("a__seedx", -1)
    assert split_seeded_name("bf16") == ("bf16", None)
