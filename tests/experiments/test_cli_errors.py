"""The entry points name a user's mistake in one line (no traceback) and keep a bug's traceback;
`--help` lists the config families, their arms and the config groups."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from absl import flags

from configs.arms import ARMS
from experiments import config_cli

REPO = Path(__file__).resolve().parents[2]
DEFAULT = "configs/default.py"


def _parse(argv: list[str], monkeypatch, default: str | None = DEFAULT):
    """What the entry point's flags parser makes of `argv` (a fresh flag namespace)."""
    argv = ["prog", *argv]
    monkeypatch.setattr(sys, "argv", list(argv))  # config_flags reads overrides from sys.argv
    monkeypatch.chdir(REPO)
    values = flags.FlagValues()
    holder = config_cli.define_config_flag("", flag_values=values)
    config_cli.flags_parser(default, flag_values=values)(argv)
    return holder.value


def _error(argv: list[str], monkeypatch, default: str | None = DEFAULT) -> str:
    with pytest.raises(SystemExit) as info:
        _parse(argv, monkeypatch, default)
    message = str(info.value.code)
    assert "\n" not in message and message.startswith("error: "), message
    return message


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        # unknown keys, with the valid ones
        (["--config.train.stepz=3"], ["--config.train.stepz", "'steps'", "'learning_rate'"]),
        (["--config.optim.lr=3"], ["--config.optim", "'train'", "'rl'"]),
        (["--config.seed.x=1"], ["--config.seed.x", "config.seed is a value"]),
        (["--config=configs/grpo.py", "--config.task.knobs.max_digitz=3"], ["'max_digits'"]),
        # a missing file, with the config files there are
        (["--config=configs/nope.py"], ["configs/nope.py", "configs/grpo.py", "configs/study.py"]),
        (["--config=configs/nope.py:bf16", "--config.seed=1"], ["no such file"]),
        # an unknown arm, with the arms
        (["--config=configs/grpo.py:bf17"], ["unknown arm 'bf17'", "fp8_block_tis_calib"]),
        (["--config=configs/study.py:nope"], ["unknown study phase 'nope'", "granularity"]),
        (["--config=configs/sweep_granularity.py:tinyy"], ["unknown option", "seeds=N"]),
        # a value the flag cannot parse
        (["--config.train.steps=abc"], ["--config.train.steps=abc"]),
    ],
)
def test_mistake_is_one_line(argv, expected, monkeypatch):
    message = _error(argv, monkeypatch)
    for text in expected:
        assert text in message, (text, message)


def test_overrides_apply_to_the_default_config(monkeypatch):
    config = _parse(["--config.train.steps=7"], monkeypatch)
    assert config.train.steps == 7 and config.calibration.enabled  # default.py's arm
    config = _parse(["--config=configs/dapo.py:bf16", "--config.seed=3"], monkeypatch)
    assert config.seed == 3 and config.rl.preset == "dapo"


def test_a_config_files_own_bug_keeps_its_traceback(monkeypatch, tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("def get_config():\n    return {}['missing']\n")
    with pytest.raises(KeyError, match="missing"):
        _parse([f"--config={broken}"], monkeypatch)


def _run(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_train_cli_unknown_key_is_one_line(tmp_path):
    proc = _run("experiments.train", "--config.train.stepz=3", f"--workdir={tmp_path}")
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "--config.train.stepz" in lines[0] and "'steps'" in lines[0]


def test_train_cli_bad_value_fails_before_sft(tmp_path):
    proc = _run("experiments.train", "--config.train.learning_rate=inf", f"--workdir={tmp_path}")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "error: invalid config: train.learning_rate must be finite and > 0, got inf"
    ]
    assert not tmp_path.joinpath("config.json").exists()


def test_train_help_lists_families_arms_and_groups():
    proc = _run("experiments.train", "--help")  # absl's --help exits with status 1
    for text in ("configs/grpo.py[:<arm>]", "configs/smollm2.py", *ARMS, "calibration:", "seed"):
        assert text in proc.stdout, text
    assert "train: b1, b2" in proc.stdout and "upper_max" in proc.stdout


def test_sweep_help_lists_sweep_configs_and_phases():
    proc = _run("experiments.sweep", "--help")
    for text in ("configs/study.py[:<phase>]", "stress_dapo_seeds", "tiny, dapo", "grpo.py"):
        assert text in proc.stdout, text
    assert "configs/study.py[:<arm>]" not in proc.stdout
