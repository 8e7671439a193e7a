"""What a finished tiny run leaves for its reader: run_info.json (commit, versions), compile time
apart from step time, the outputs named in the final summary, and the evaluation command that
scores a checkpoint from its parameters alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
from experiments_testutil import tiny_config

from calclip_jax.config import ConfigError
from calclip_jax.probes.eval_checkpoint import (
    EvalError,
    evaluate_checkpoint,
    restore_params,
    run_spec_of,
)
from calclip_jax.train.rl_loop import format_summary, run_experiment
from calclip_jax.workdir import run_record as R
from calclip_jax.workdir.checkpoints import Checkpointer
from calclip_jax.workdir.run_info import PACKAGES, cpu_description

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> tuple[Path, dict, list[str]]:
    """(workdir, summary, log lines) of a tiny 3-step run (checkpoints at steps 2 and 3)."""
    workdir = tmp_path_factory.mktemp("run")
    lines: list[str] = []
    cache = str(tmp_path_factory.mktemp("cache"))
    summary = run_experiment(tiny_config(cache), str(workdir), log=lines.append)
    return workdir, summary, lines


def test_run_info_records_commit_and_versions(finished_run):
    workdir, _, _ = finished_run
    (start,) = R.load_run_info(workdir)["starts"]
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip
    assert start["git"]["commit"] == head and isinstance(start["git"]["dirty"], bool)
    assert set(start["packages"]) == set(PACKAGES)
    assert all(start["packages"][p] for p in PACKAGES)
    assert start["python"] == ".".join(map(str, sys.version_info[:3]))
    assert start["cpu"] == cpu_description() and start["cpu"]["cores"] == os.cpu_count()


def test_cpu_description_reads_model_and_isa(tmp_path):
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse2 avx2 fma\n\n"
                   "processor\t: 1\nmodel name\t: other\nflags\t\t: avx512f\n")  # fmt: skip
    assert cpu_description(x86) == {"model": "AMD EPYC", "cores": os.cpu_count(),
                                    "isa": ["avx2", "fma"]}  # fmt: skip
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd sve\n")
    assert cpu_description(arm)["isa"] == ["asimd", "sve"]
    assert cpu_description(tmp_path / "absent") == {"model": None, "cores": os.cpu_count(),
                                                    "isa": None}  # fmt: skip


def test_compile_time_reported_apart_from_step_time(finished_run):
    workdir, summary, lines = finished_run
    rows = R.read_metrics(workdir)
    first = rows[0]
    assert 0 < first["compile_time_s"] <= first["step_time_s"]
    assert summary["rl_first_step_time_s"] == first["step_time_s"]
    assert summary["rl_compile_time_s"] == pytest.approx(sum(r["compile_time_s"] for r in rows))
    assert summary["rl_step_time_s_median"] < first["step_time_s"]  # compiling left out
    assert 0 < summary["sft_compile_time_s"] <= summary["sft_time_s"]
    assert R.load_summary(workdir)["sft_time_s"] == summary["sft_time_s"]
    assert any(line.startswith("rl step 1: ") and "compiling" in line for line in lines)
    assert any(line.startswith("sft warm start:") and "compiling" in line for line in lines)


def test_final_summary_says_where_outputs_are(finished_run):
    workdir, summary, _ = finished_run
    text = format_summary(summary, str(workdir))
    for kind, name in (("workdir:", ""), ("metrics:", "metrics.jsonl"), ("tensorboard:", "tb")):
        line = next(ln for ln in text.splitlines() if ln.startswith(kind))
        assert line.split()[-1] == str(workdir / name).rstrip("/")
    assert "figures:" not in text  # a run makes none
    assert "experiments.export" not in text  # a fresh model has no HF architecture to export to


def test_restores_exactly_the_checkpoints_params(finished_run):
    workdir, _, _ = finished_run
    spec, checkpointer = run_spec_of(workdir), Checkpointer(str(workdir))
    params = {step: restore_params(spec, checkpointer, step) for step in (2, 3)}
    checkpointer.close()
    raw = ocp.StandardCheckpointer().restore(workdir / R.CHECKPOINTS_DIR / "3" / "default")
    same = jax.tree.map(np.array_equal, params[3][0], raw["params"])
    assert all(jax.tree.leaves(same)) and params[3][1] is None  # bf16: no fp8 meta
    moved = jax.tree.map(np.array_equal, params[2][0], params[3][0])
    assert not all(jax.tree.leaves(moved))  # step 3's update changed them


def test_evaluate_checkpoint_matches_the_runs_own_eval(finished_run):
    workdir, _, _ = finished_run
    rows = {r["step"]: r for r in R.read_metrics(workdir)}
    for step in (2, 3):  # greedy, the run's rollout precision and eval.num_prompts
        record = evaluate_checkpoint(workdir, step=step)
        assert record["step"] == step and record["num_prompts"] == 8
        assert record["greedy"]["accuracy"] == pytest.approx(rows[step]["eval_accuracy"])
        assert record["greedy"]["garbled"] == pytest.approx(rows[step]["eval_garbled_frac"])
        assert len(record["greedy_correct"]) == 8 and set(record["greedy_correct"]) <= {0, 1}
        assert np.mean(record["greedy_correct"]) == pytest.approx(record["greedy"]["accuracy"])
    latest = evaluate_checkpoint(workdir, split="train", num_prompts=4, samples=2)
    assert (latest["step"], latest["split"], latest["num_prompts"]) == (3, "train", 4)
    assert latest["sampled"]["n"] == 8 and 0 <= latest["sampled"]["accuracy"] <= 1
    with pytest.raises(EvalError, match=r"no checkpoint at step 1; steps: \[2, 3\]"):
        evaluate_checkpoint(workdir, step=1)
    with pytest.raises(EvalError, match="split must be one of"):
        evaluate_checkpoint(workdir, split="dev")


def test_evaluate_checkpoint_in_another_precision(finished_run):
    workdir, _, _ = finished_run
    run_precision = run_spec_of(workdir).config.rollout.precision
    other = "fp32" if run_precision != "fp32" else "bf16"
    record = evaluate_checkpoint(workdir, step=3, precision=other)
    assert record["precision"] == other == run_spec_of(workdir, other).config.rollout.precision
    assert record["greedy"]["n"] == 8 and 0 <= record["greedy"]["accuracy"] <= 1
    with pytest.raises(ConfigError, match="precision"):
        evaluate_checkpoint(workdir, step=3, precision="fp7")


def test_evaluate_command(finished_run, tmp_path):
    workdir, _, _ = finished_run
    out = tmp_path / "evals.jsonl"
    cmd = [sys.executable, "-m", "experiments.evaluate", f"--workdir={workdir}", "--step=2",
           f"--json={out}"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"{workdir} step 2, test split, 8 prompts, greedy" in proc.stdout
    assert json.loads(out.read_text())["step"] == 2
    bad = subprocess.run([*cmd[:3], f"--workdir={tmp_path / 'none'}"], cwd=REPO,
                         capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert bad.returncode == 1 and bad.stderr.strip().endswith("missing, not a run's workdir")
