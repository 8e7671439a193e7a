"""The dump reports on a tiny worked_addition sweep of two identical arms.

experiments.working_fidelity: the shares are those of the decoded dumps, identical arms pair to
zero. experiments.garbled_coincidence: the counts are those of the decoded dumps and metrics.
experiments.cut_gradient: its counts are those of the decoded dumps. All three name bad input.
With --last_step, they and experiments.paired_report read the sweep as it stood at that step."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest
from experiments_testutil import tiny_config
from run_fixtures import check_last_step

from calclip_jax.probes.dump_responses import dump_responses
from calclip_jax.reports import cut_gradient
from calclip_jax.reports.garbled_coincidence import load_sweep
from calclip_jax.reports.working_fidelity import batch_shares, sweep_fidelity
from calclip_jax.train.rl_loop import run_experiment
from calclip_jax.workdir import run_record as R
from calclip_jax.workdir.ratio_dumps import dump_steps


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """One 2-step worked_addition run dumping both batches, and a copy of it as a second arm."""
    root = tmp_path_factory.mktemp("fidelity")
    overrides = {
        "task.name": "worked_addition",
        "rollout.max_new_tokens": 16,
        "train.steps": 2,
        "log.ratios_every": 1,
    }
    run_experiment(tiny_config(str(root / "cache"), **overrides), str(root / "s" / "a__seed0"),
                   log=lambda _: None)  # fmt: skip
    shutil.copytree(root / "s" / "a__seed0", root / "s" / "b__seed0")
    return root / "s"


def test_the_run_logs_its_working_every_step(sweep):
    rows = R.read_metrics(sweep / "a__seed0")
    assert [r["step"] for r in rows if "working_exact" in r] == [1, 2]
    for r in rows:
        shares = [r[f"working_{f}"] for f in ("all_columns", "columns_right", "sums_true", "exact")]
        assert all(0.0 <= s <= 1.0 for s in shares)
        assert r["working_exact"] <= min(shares)  # verbatim passes every other check


def test_shares_are_the_decoded_batches(sweep):
    got = sweep_fidelity(sweep)
    assert sorted(got) == ["a", "b"]
    np.testing.assert_equal(got["a"], got["b"])  # NaN where no sampled sum carries
    assert sorted(got["a"][0]) == sorted(dump_steps(sweep / "a__seed0")) == [1, 2]
    for step in (1, 2):
        want = batch_shares(dump_responses(sweep / "a__seed0", step)[1])
        np.testing.assert_equal(got["a"][0][step], want)


def test_cli_writes_the_report_and_figure_and_names_bad_input(sweep, tmp_path):
    cmd = [sys.executable, "-m", "experiments.working_fidelity", f"--sweep={sweep}", "--n_boot=50"]
    out, png = tmp_path / "f.md", tmp_path / "f.png"
    done = subprocess.run(
        [*cmd, "--baseline=a", f"--out={out}", f"--figure={png}", "--surprisal"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert out.read_text() == done.stdout and png.stat().st_size > 0
    roles = [r.split("|")[2:] for r in done.stdout.splitlines() if "digit |" in r or "other |" in r]
    assert len(roles) == 6 and roles[:3] == roles[3:]  # arms a and b: identical dumps
    b_rows = [r for r in done.stdout.splitlines() if r.startswith("| b |") and "1 x 2" in r]
    assert len(b_rows) == 7 and all(r.endswith("| 0 [0, 0] | 1 x 2 |") for r in b_rows[:5])
    assert b_rows[5].startswith("| b | carry left out")  # one-digit sums: no carry into a column
    assert b_rows[6].startswith("| b | a digit written not its sum's")  # random weights write none
    assert all(r.endswith("| n/a | n/a | n/a | 1 x 2 |") for r in b_rows[5:])
    bad = subprocess.run([*cmd, "--baseline=c"], capture_output=True, text=True)
    assert bad.returncode != 0 and "no arm 'c'; arms: ['a', 'b']" in bad.stderr
    empty = subprocess.run([*cmd[:-2], f"--sweep={tmp_path}"], capture_output=True, text=True)
    assert empty.returncode != 0 and "holds a ratio dump" in empty.stderr


def test_garbled_coincidence_counts_the_dumps_and_names_bad_input(sweep, tmp_path):
    cmd = [sys.executable, "-m", "experiments.garbled_coincidence", f"--sweep={sweep}"]
    out = tmp_path / "g.md"
    done = subprocess.run([*cmd, "--threshold=0", f"--out={out}"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == done.stdout and "exceeds 0," in done.stdout
    shares = [r["garbled_frac"] for r in R.read_metrics(sweep / "a__seed0")]
    spikes = sum(s > 0 for s in shares)
    cut = [
        len({r.prompt for r in dump_responses(sweep / "a__seed0", step)[1] if not r.finished})
        for step in (1, 2)
    ]
    row = next(r for r in done.stdout.splitlines() if r.startswith("| 0 | `a` / `b` |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:5] == ["2", f"{spikes} / {spikes}", str(spikes)]  # identical arms: all shared
    assert cells[8:10] == [f"{sum(cut)} / {sum(cut)}", str(sum(cut))]
    run = load_sweep(sweep)["a"][0]
    assert [len(run.batches[s][1]) for s in (1, 2)] == cut
    bad = subprocess.run([*cmd, "--threshold=1.5"], capture_output=True, text=True)
    assert bad.returncode != 0 and "--threshold must lie in [0, 1), got 1.5" in bad.stderr
    shutil.copytree(sweep / "a__seed0", tmp_path / "one" / "a__seed0")
    lone = subprocess.run(
        [*cmd[:-1], f"--sweep={tmp_path / 'one'}"], capture_output=True, text=True
    )
    assert lone.returncode != 0 and "has two arms to pair" in lone.stderr


def test_cut_gradient_counts_the_dumps_and_names_bad_input(sweep, tmp_path):
    cmd = [sys.executable, "-m", "experiments.cut_gradient", f"--sweep={sweep}", "--n_boot=50"]
    out = tmp_path / "c.md"
    done = subprocess.run([*cmd, f"--out={out}"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == done.stdout
    responses = [r for step in (1, 2) for r in dump_responses(sweep / "a__seed0", step)[1]]
    cut = [r for r in responses if not r.finished]
    rows = {
        cells[0]: cells
        for r in done.stdout.splitlines()
        if r.startswith(("| a |", "| b |"))
        for cells in [[c.strip() for c in r.strip("|").split("|")]]
    }
    assert rows["a"][1:3] == ["1 x 2", f"{len(cut)} of {len(responses)}"]
    assert rows["a"][1:] == rows["b"][1:]  # identical arms
    counts = cut_gradient.load_sweep(sweep)["a"][0]
    assert sum(c.zero_rows[0] for c in counts.values()) == sum(r.advantage == 0 for r in cut)
    empty = subprocess.run([*cmd[:-2], f"--sweep={tmp_path}"], capture_output=True, text=True)
    assert empty.returncode != 0 and "holds a ratio dump" in empty.stderr


@pytest.mark.parametrize(
    "command",
    [
        "experiments.working_fidelity --n_boot=50",
        "experiments.paired_report --baseline=a --n_boot=50",
        "experiments.garbled_coincidence --threshold=0",
        "experiments.cut_gradient --n_boot=50",
    ],
)
def test_last_step_reads_the_sweep_as_it_stood(sweep, tmp_path, command):
    cmd = [sys.executable, "-m", *command.split()]

    check_last_step(cmd, sweep, tmp_path / "then", last_step=1)
    bad = subprocess.run(
        [*cmd, f"--sweep={sweep}", "--last_step=0"], capture_output=True, text=True
    )
    assert bad.returncode != 0 and "last_step" in bad.stderr
