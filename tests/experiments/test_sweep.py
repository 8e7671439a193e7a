"""calclip_jax.sweeps and experiments.sweep with a fake train script: expansion,
skip-finished, failures, summary, CLI."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_collections import ConfigDict

from calclip_jax import sweeps
from calclip_jax.config import base_config
from configs import sweep_granularity
from configs.arms import apply_overrides

REPO = Path(__file__).resolve().parents[2]
PRECISIONS = {"bf16", "fp8_tensor", "fp8_delayed", "fp8_channel", "fp8_block", "fp8_mx"}

FAKE_TRAIN = textwrap.dedent('''
    """Stands in for experiments.train: writes config.json, metrics.jsonl, summary.json."""
    import json, pathlib, sys
    args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
    workdir = pathlib.Path(args["workdir"])
    workdir.mkdir(parents=True, exist_ok=True)
    over = {k[len("config."):]: v for k, v in args.items() if k.startswith("config.")}
    (workdir / "config.json").write_text(json.dumps(
        {"base": args["config"], "seed": int(over.get("seed", 0)),
         "train": {"precision": over.get("train.precision"), "steps": int(over["train.steps"])}}))
    with open(workdir / "metrics.jsonl", "w") as f:
        for step in range(1, int(over["train.steps"]) + 1):
            f.write(json.dumps({"step": step, "reward_mean": step / 10, "entropy": 1.0}) + "\\n")
    print("fake train ran", over)
    if over.get("fail") == "true":
        print("boom: simulated crash")
        sys.exit(3)
    (workdir / "summary.json").write_text(json.dumps({"wall_time_s": 1.0}))
''')


@pytest.fixture
def fake_train(tmp_path):
    path = tmp_path / "fake_train.py"
    path.write_text(FAKE_TRAIN)
    return str(path)


def sweep_config(base, seeds=()):
    c = ConfigDict()
    c.base = str(base)
    c.arms = ConfigDict(
        {"good": {"train.precision": "fp8_block"}, "bad": {"fail": True}}, allow_dotted_keys=True
    )
    c.seeds = list(seeds)
    c.common = ConfigDict({"train": {"steps": 4}})  # nested form also accepted
    return c


def test_expand_arms_precedence_and_seeds(tmp_path):
    c = sweep_config(tmp_path, seeds=[0, 2])
    c.common = ConfigDict(
        {"train.steps": 4, "seed": 9, "train.precision": "bf16"}, allow_dotted_keys=True
    )
    arms = sweeps.expand_arms(c)
    assert list(arms) == ["bad__seed0", "bad__seed2", "good__seed0", "good__seed2"]
    assert arms["good__seed2"] == {"train.steps": 4, "seed": 2, "train.precision": "fp8_block"}
    assert arms["bad__seed0"]["train.precision"] == "bf16"
    cmd = sweeps.train_command("m.train", "b.py", Path("W"), {"a.b": True, "c": (1, 2)}, "py")
    assert cmd == [
        "py",
        "-m",
        "m.train",
        "--config=b.py",
        "--workdir=W",
        "--config.a.b=true",
        "--config.c=(1, 2)",
    ]
    with pytest.raises(ValueError, match="arms"):
        sweeps.expand_arms(ConfigDict({"base": "x", "arms": {}}))


def test_failure_is_reported_and_sweep_continues_then_skips_finished(tmp_path, fake_train):
    base = tmp_path / "base.py"
    base.write_text("")
    out = tmp_path / "sweep"
    logs: list[str] = []
    results = sweeps.run_sweep(sweep_config(base), out, train_module=fake_train, log=logs.append)
    assert {r.name: r.status for r in results} == {"bad": "failed", "good": "finished"}
    failed = next(r for r in results if r.name == "bad")
    assert failed.returncode == 3
    assert any("FAILED bad (exit code 3" in m and "boom: simulated crash" in m for m in logs)
    assert json.loads((out / "good" / "config.json").read_text())["train"]["precision"] == (
        "fp8_block"
    )
    rows = (out / "summary.csv").read_text().splitlines()
    assert rows[0].startswith("arm,status,") and len(rows) == 3
    assert rows[1].startswith("bad,failed,4,") and rows[2].startswith("good,finished,4,")
    assert "| good | finished |" in (out / "summary.md").read_text()
    assert len((out / "commands.sh").read_text().splitlines()) == 2

    good_log = (out / "good" / "train.log").read_text()
    logs.clear()
    results = sweeps.run_sweep(
        sweep_config(base), out, train_module=fake_train, parallel=2, log=logs.append
    )
    assert {r.name: r.status for r in results} == {"bad": "failed", "good": "skipped"}
    assert "[sweep] skip good: finished (summary.json exists)" in logs
    assert (out / "good" / "train.log").read_text() == good_log  # not rerun


def test_parallel_seeds_only_and_dry_run(tmp_path, fake_train):
    base = tmp_path / "base.py"
    base.write_text("")
    c = sweep_config(base, seeds=[0, 1])
    logs: list[str] = []
    results = sweeps.run_sweep(
        c,
        tmp_path / "s",
        train_module=fake_train,
        parallel=2,
        quiet=True,
        only=["good__seed0", "good__seed1"],
        log=logs.append,
    )
    assert [r.status for r in results] == ["finished", "finished"]
    assert json.loads((tmp_path / "s" / "good__seed1" / "config.json").read_text())["seed"] == 1
    assert len(logs) == 1 and "summary" in logs[0]  # quiet: only the final line
    assert "Mean and std over seeds" in (tmp_path / "s" / "summary.md").read_text()
    with pytest.raises(ValueError, match="unknown arms"):
        sweeps.run_sweep(c, tmp_path / "s", train_module=fake_train, only=["nope"])
    logs.clear()
    assert (
        sweeps.run_sweep(c, tmp_path / "d", train_module=fake_train, dry_run=True, log=logs.append)
        == []
    )
    assert len(logs) == 4 and not (tmp_path / "d").exists()


def test_cli_exit_status_and_summary(tmp_path, fake_train):
    cfg = tmp_path / "my_sweep.py"
    cfg.write_text(
        textwrap.dedent(f"""
        from ml_collections import ConfigDict
        def get_config(arg=""):
            c = ConfigDict()
            c.base = {str(tmp_path / "my_sweep.py")!r}
            arms = {{"good": {{"train.precision": "bf16"}}}}
            if arg == "with_bad":
                arms["bad"] = {{"fail": True}}
            c.arms = ConfigDict(arms, allow_dotted_keys=True)
            c.common = ConfigDict({{"train.steps": 2}}, allow_dotted_keys=True)
            return c
    """)
    )
    cmd = [
        sys.executable,
        "-m",
        "experiments.sweep",
        f"--workdir={tmp_path / 'out'}",
        f"--train_module={fake_train}",
    ]
    proc = subprocess.run(
        [*cmd, f"--config={cfg}:with_bad"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 1, proc.stderr
    assert "FAILED bad" in proc.stdout
    assert (tmp_path / "out" / "summary.md").exists()
    proc = subprocess.run(
        [*cmd, f"--config={cfg}", "--quiet"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("arg", ["", "tiny", "dapo,steps=7,seeds=3"])
def test_granularity_sweep_config_parses_and_keys_exist(arg):
    c = sweep_granularity.get_config(arg)
    arms = sweeps.expand_arms(c)
    assert Path(sweeps.resolve_base(c.base, REPO)).is_file()
    for name, overrides in arms.items():
        assert overrides["rollout.precision"] in PRECISIONS, name
        assert overrides["train.precision"] in PRECISIONS, name
        assert overrides["correction.mode"] == "token_tis"
        apply_overrides(base_config(), overrides)  # KeyError if the train config lacks a key
    if arg == "":
        assert len(arms) == 12 and {"bf16", "fp8_rollout", "fp8_mx_tis_calib"} <= set(arms)
        for g in ("tensor", "delayed", "channel", "block", "mx"):
            assert arms[f"fp8_{g}_tis"]["calibration.enabled"] is False
            cal = arms[f"fp8_{g}_tis_calib"]
            assert cal["calibration.enabled"] is True and cal["calibration.upper_rule"] == "balance"
            assert cal["train.precision"] == cal["rollout.precision"] == f"fp8_{g}"
        assert arms["fp8_rollout"]["train.precision"] == "bf16"
    elif arg == "tiny":
        assert len(arms) == 3 and all(o["train.steps"] <= 5 for o in arms.values())
    else:
        assert len(arms) == 36 and arms["bf16__seed2"]["seed"] == 2
        assert all(o["rl.preset"] == "dapo" and o["train.steps"] == 7 for o in arms.values())
    with pytest.raises(ValueError, match="unknown option"):
        sweep_granularity.get_config("huge")
