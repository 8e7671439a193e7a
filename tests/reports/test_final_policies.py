"""Final policies paired per prompt (calclip_jax.reports.final_policies, and the paired report's
--evals)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from calclip_jax.analysis.paired import paired_difference
from calclip_jax.reports.final_policies import final_policy_rows, load_scores
from calclip_jax.workdir.run_record import METRICS_FILE, SUMMARY_FILE, metrics_line


def _record(name: str, correct: np.ndarray | None, **setting) -> dict:
    record = {"workdir": f"results/sweep/{name}", "step": 40, "split": "test",
              "num_prompts": 500, "precision": "bf16", **setting}  # fmt: skip
    record["greedy"] = {"accuracy": float(np.mean(correct)) if correct is not None else 0.5}
    if correct is not None:
        record["greedy_correct"] = [int(c) for c in correct]
    return record


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _baseline(seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random(500) < 0.6).astype(int)


def _flip_correct(correct: np.ndarray, k: int) -> np.ndarray:
    """`correct` with its first k right answers made wrong: k points down per 100 prompts."""
    out = correct.copy()
    out[np.flatnonzero(out)[:k]] = 0
    return out


def test_a_few_flips_are_resolved_that_unpaired_errors_would_not(tmp_path):
    base = {s: _baseline(s) for s in (1, 2)}
    records = [_record(f"bf16__seed{s}", base[s]) for s in (1, 2)]
    records += [_record(f"fp8__seed{s}", _flip_correct(base[s], 10)) for s in (1, 2)]
    scores, setting = load_scores(_write(tmp_path / "evals.jsonl", records))
    assert setting == {"step": 40, "split": "test", "num_prompts": 500, "precision": "bf16"}
    assert sorted(scores) == ["bf16", "fp8"] and sorted(scores["fp8"]) == [1, 2]
    fp8 = np.stack([scores["fp8"][s] for s in (1, 2)])
    bf16 = np.stack([scores["bf16"][s] for s in (1, 2)])
    diff = paired_difference(fp8, bf16, block=1, n_boot=2000)
    assert diff.estimate == pytest.approx(-0.02)  # 10 flips of 500, in both seeds
    assert diff.excludes(0.0) and diff.high < 0  # every flip points one way
    # two accuracies of 1000 answers each have a standard error near 1.5 points: unpaired,
    # a 2-point difference would not be resolved
    rows = final_policy_rows(scores, "bf16", n_boot=2000)
    assert [r[0] for r in rows] == ["bf16", "fp8"] and rows[0][2] == ""
    assert rows[1][2].startswith("-2 [")
    assert rows[1][3:] == ["-2 [-2, -2]", "1: -2, 2: -2", "2 x 500"]  # t over seeds: no spread


def test_identical_arms_differ_by_exactly_nothing(tmp_path):
    base = _baseline(3)
    path = _write(tmp_path / "e.jsonl", [_record("a__seed3", base), _record("b__seed3", base)])
    rows = final_policy_rows(*[load_scores(path)[0]], "a", n_boot=200)
    assert rows[1][2:5] == ["0 [0, 0]", "one seed: none", "3: 0"]


def test_the_latest_line_of_a_run_wins_and_old_lines_are_left_out(tmp_path):
    base = _baseline(4)
    records = [
        _record("a__seed1", None),  # written before per-prompt verdicts existed
        _record("b__seed1", np.zeros(500, int)),
        _record("b__seed1", base),  # rescored
        _record("a__seed1", base),
    ]
    scores, _ = load_scores(_write(tmp_path / "e.jsonl", records))
    np.testing.assert_array_equal(scores["b"][1], base)
    assert sorted(scores) == ["a", "b"]


def test_scores_from_different_settings_are_refused(tmp_path):
    base = _baseline(5)
    mixed = [_record("a__seed1", base), _record("b__seed1", base, precision="fp8_tensor")]
    with pytest.raises(ValueError, match=r"different settings, not paired.*fp8_tensor"):
        load_scores(_write(tmp_path / "mixed.jsonl", mixed))
    with pytest.raises(ValueError, match="no record with per-prompt verdicts"):
        load_scores(_write(tmp_path / "old.jsonl", [_record("a__seed1", None)]))
    scores, _ = load_scores(_write(tmp_path / "ok.jsonl", mixed[:1]))
    with pytest.raises(ValueError, match="baseline arm 'bf16' not among"):
        final_policy_rows(scores, "bf16")


def test_paired_report_adds_the_final_policies(tmp_path):
    sweep = tmp_path / "sweep"
    for arm in ("bf16", "fp8"):
        folder = sweep / f"{arm}__seed1"
        folder.mkdir(parents=True)
        rows = [{"step": t, "reward_mean": 0.5} for t in (1, 2)]
        (folder / METRICS_FILE).write_text("".join(metrics_line(r) for r in rows))
        (folder / SUMMARY_FILE).write_text(json.dumps({"sft_params_digest": "aa"}))
    base = _baseline(6)
    records = [_record("bf16__seed1", base), _record("fp8__seed1", _flip_correct(base, 5))]
    evals = _write(tmp_path / "e.jsonl", records)
    cmd = [sys.executable, "-m", "experiments.paired_report", f"--sweep={sweep}", "--n_boot=50"]
    done = subprocess.run([*cmd, f"--evals={evals}"], capture_output=True, text=True, check=True)
    assert "Final policies scored alike, paired per prompt against `bf16`" in done.stdout
    assert "| fp8 | 5" in done.stdout and "| -1 [" in done.stdout
    bad = subprocess.run(
        [*cmd, f"--evals={tmp_path / 'none.jsonl'}"], capture_output=True, text=True
    )
    assert bad.returncode != 0 and "--evals" in bad.stderr
    early = subprocess.run(
        [*cmd, f"--evals={evals}", "--last_step=2"], capture_output=True, text=True
    )  # the scores are of step 40's policies, the runs read through step 2
    assert early.returncode != 0 and "RL step 40, after --last_step" in early.stderr
