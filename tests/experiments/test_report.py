"""experiments.report and calclip_jax.reports.study* on a synthetic results tree with known
numbers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from calclip_jax.reports import study, study_dumps, study_figures, study_tables
from calclip_jax.workdir.run_record import RunRecordError
from experiments import report

REPO = Path(__file__).resolve().parents[2]
STEPS = 12
LAYOUT = report.study_layout()


def _write_arm(
    path: Path, reward: float, acc: float, lower: float, lower_ref: float | None = None
) -> None:
    """An arm with constant reward/clip shares and eval accuracy `acc` at the last step."""
    path.mkdir(parents=True)
    precision = "bf16" if "bf16" in path.name else "fp8_block"
    cfg = {
        "train": {"steps": STEPS, "precision": precision},
        "log": {"surge_factor": 1.5, "surge_warmup": 2},
        "resolved": {"clip_bounds": [0.8, 1.28]},
    }
    (path / "config.json").write_text(json.dumps(cfg))
    rows = []
    for step in range(1, STEPS + 1):
        entropy = 0.5 if step < 8 else 2.0  # raw surge at step 8, 10-step mean at step 9
        rows.append(
            {
                "step": step,
                "reward_mean": reward,
                "eval_accuracy": acc if step == STEPS else None,
                "entropy": entropy,
                "clip_frac_lower_neg": lower,
                "clip_frac_upper_pos": lower / 2,
                "clip_frac_lower_neg_ref": lower_ref,
                "clip_frac_upper_pos_ref": None if lower_ref is None else lower_ref / 2,
                "clip_lower": 0.8,
                "clip_upper": 1.2,
                "response_len_mean": 3.0,
                "garbled_frac": 0.0,
                "mismatch_k3": 0.0,
            }
        )
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("results")
    # GRPO seed s: BF16 reward 0.6 + s/10, FP8 0.02 lower, calibrated 0.01 lower
    for seed, (phase, suffix) in enumerate(
        [("granularity", ""), ("seeds", "__seed1"), ("seeds", "__seed2")]
    ):
        base = 0.6 + seed / 10
        _write_arm(root / phase / f"bf16{suffix}", base, 0.5, 0.01)
        _write_arm(root / phase / f"fp8_block_tis{suffix}", base - 0.02, 0.4, 0.08)
        _write_arm(root / phase / f"fp8_block_tis_calib{suffix}", base - 0.01, 0.45, 0.02, 0.01)
    _write_arm(root / "dapo" / "dapo_bf16", 0.7, 0.5, 0.01)
    _write_arm(root / "stress" / "fp8_tensor_tis", 0.5, 0.3, 0.12)
    _write_arm(root / "stress" / "fp8_tensor_tis_calib", 0.5, 0.3, 0.03, 0.03)
    dumps = root / "stress" / "fp8_tensor_tis" / "ratios"
    dumps.mkdir()
    # 4 A<0 tokens at p=0.1: FP8 ratios 0.5, 0.7, 0.9, 1.0 (half below 0.8), shadow all 1.0
    np.savez(
        dumps / "step_000010.npz",
        ratio=np.array([[0.5, 0.7, 0.9, 1.0]], np.float32),
        ratio_ref=np.ones((1, 4), np.float32),
        advantages=np.array([-1.0], np.float32),
        mask=np.ones((1, 4), bool),
        old_prob=np.full((1, 4), 0.1, np.float32),
    )
    return root


def test_seeds_table_means_and_paired_differences(results):
    table = study_tables.seeds_table(study.load_all(results, LAYOUT.phases), LAYOUT.seed_runs)
    rows = {tuple(c.strip() for c in line.split("|")[1:4]): line for line in table.splitlines()}
    bf16 = rows[("GRPO", "bf16", "reward (last 10)")]
    assert "0.600, 0.700, 0.800" in bf16 and "0.700 ± 0.100 (n=3)" in bf16
    fp8 = rows[("GRPO", "fp8_block_tis", "reward (last 10)")]
    assert "-0.020; -0.020, -0.020, -0.020" in fp8
    acc = rows[("GRPO", "fp8_block_tis_calib", "final eval acc")]
    assert "0.450 ± 0.000 (n=3)" in acc and "-0.050;" in acc
    assert "(n=1)" in rows[("DAPO", "bf16", "reward (last 10)")]
    assert ("DAPO", "fp8_block_tis", "reward (last 10)") not in rows  # no such runs


def test_distortion_table_ratio_per_phase(results):
    arms = study.load_all(results, LAYOUT.phases)
    grpo = study_tables.distortion_table(arms, study.granularity_rows("", LAYOUT.granularities))
    assert "| block | 8.00% | 1.00% | 8.0x |" in grpo
    rows = study.granularity_rows("stress/", ("tensor", "block"))
    stress = study_tables.distortion_table(arms, rows, bf16="stress/bf16")
    assert "| tensor | 12.00% | 3.00% | 4.0x |" in stress and "| block |" not in stress


def test_cli_writes_tables_and_figures(results):
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.report", f"--results={results}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    tables = (results / "tables.md").read_text()
    assert "stress phase" in tables
    # the ratio dump: 2 of 4 A<0 tokens below 0.8 in FP8, none in the shadow, all at p in [0.05,0.2)
    assert "50.00% vs 0.00% (n=4)" in tables
    # noise: d = log r_FP8 - log 1 = log(0.5, 0.7, 0.9, 1.0), all on A<0 tokens
    d = np.log([0.5, 0.7, 0.9, 1.0])
    noise = tables.split("## Precision noise")[1].split("##")[0]
    # all four tokens are A<0 at p = 0.1 (< 0.5): no A>0 tokens, none at p >= 0.5
    expected = f"| {d.std():.3f} / - | {d.std():.3f} / - | - / - | 1.000 / - | 75.00% |"
    assert f"| stress/fp8_tensor_tis | 1 | 4 {expected}" in noise
    # entropy jumps from 0.5 to 2.0 at step 8; its 10-step mean passes 0.75 at step 9
    assert "| 9 / 8 | 2.500 |" in tables  # rebound at step 12: (5 x 0.5 + 5 x 2.0) / 10 / 0.5
    figures = ("training_dynamics", "distortion", "stress", "search_clip_by_probability", "rebound")
    for fig in figures:
        assert (results / "figures" / f"{fig}.png").stat().st_size > 1000, fig


def test_composition_table_separates_composition_from_precision_noise(results):
    arms = study.load_all(results, LAYOUT.phases)
    cols = arms["stress/fp8_tensor_tis"]["cols"]
    nan = np.full(STEPS, np.nan)
    cols["composition_logp_std"], cols["composition_logp_max"] = nan.copy(), nan.copy()
    cols["composition_clip_lower_neg"], cols["composition_clip_upper_pos"] = nan.copy(), nan.copy()
    for i, (std, peak, low) in zip((0, 9), ((0.1, 0.5, 0.04), (0.3, 0.9, 0.02)), strict=True):
        cols["composition_logp_std"][i], cols["composition_logp_max"][i] = std, peak
        cols["composition_clip_lower_neg"][i], cols["composition_clip_upper_pos"][i] = low, 0.0
    block = arms["fp8_block_tis"]["cols"]
    for key in ("composition_logp_std", "composition_logp_max"):
        block[key] = np.where(np.arange(STEPS) == 9, 0.0, np.nan)
    table = study_dumps.composition_table(arms)
    d = np.log([0.5, 0.7, 0.9, 1.0])  # the dump's precision noise, all A<0
    row = "| stress/fp8_tensor_tis | fp8_block | 2 | 0.2000 / 0.900 | 3.00% / 0.00% |"
    assert f"{row} {d.std():.3f} / - |" in table
    assert "| 1 other arms" in table and "fp8_block_tis |" not in table


def test_probability_binned_reads_the_resolved_lower_bound(results, tmp_path):
    arms = study.load_all(results, LAYOUT.phases)
    config = results / "stress" / "fp8_tensor_tis" / "config.json"
    cfg = json.loads(config.read_text())
    try:  # a lower bound of 0.6: only the 0.5 ratio of the dump is below it
        config.write_text(json.dumps({**cfg, "resolved": {"clip_bounds": [0.6, 1.2]}}))
        table = study_figures.probability_binned(
            arms, ["stress/fp8_tensor_tis"], tmp_path / "a.png"
        )
        assert "25.00% vs 0.00% (n=4)" in table
        config.write_text(json.dumps({k: v for k, v in cfg.items() if k != "resolved"}))
        with pytest.raises(RunRecordError, match=f"{config}: lacks resolved.clip_bounds"):
            study_figures.probability_binned(arms, ["stress/fp8_tensor_tis"], tmp_path / "b.png")
    finally:
        config.write_text(json.dumps(cfg))


def test_missing_or_empty_results_fail_instead_of_blank_output(tmp_path):
    with pytest.raises(ValueError, match="no such folder"):
        study.check_results(tmp_path / "nope", LAYOUT.phases)
    (tmp_path / "granularity" / "bf16").mkdir(parents=True)  # a phase folder, but no run in it
    with pytest.raises(ValueError, match="no runs in any phase folder"):
        study.check_results(tmp_path, LAYOUT.phases)
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.report", f"--results={tmp_path / 'nope'}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"error: --results={tmp_path / 'nope'}: no such folder"
    assert not (tmp_path / "nope").exists()  # no empty tables or figures written
