"""The committed runs' commands (results/**/commands.sh) reproduce the knobs whose default changed
after the runs: what a command's config file and flags give is what the run's config.json says it
ran with (a knob config.json lacks: what it meant then, `config_record.meant_before`)."""

from __future__ import annotations

import importlib
import json
import shlex
from pathlib import Path

import pytest

from calclip_jax.workdir.config_record import meant_before
from experiments.sweep import REPO_ROOT

RESULTS = Path(REPO_ROOT) / "results"
KNOBS = ("train.same_forward",)  # knobs whose default changed the behaviour of committed runs


def _train_commands() -> list[tuple[Path, list[str]]]:
    """(commands.sh, argv) of every committed `experiments.train` line."""
    found = []
    for path in sorted(RESULTS.glob("**/commands.sh")):
        for line in path.read_text().splitlines():
            argv = shlex.split(line, comments=True)
            if "experiments.train" in argv:
                found.append((path, argv))
    return found


def _flag(argv: list[str], name: str) -> str | None:
    values = [a.partition("=")[2] for a in argv if a.startswith(f"{name}=")]
    return values[-1] if values else None


def _command_value(argv: list[str], knob: str) -> object:
    """`knob` as the command sets it: its flag, else its config file's (`--config=<file>:<arm>`)."""
    flag = _flag(argv, f"--config.{knob}")
    if flag is not None:
        return {"true": True, "false": False}.get(flag.lower(), flag)
    path, _, arm = _flag(argv, "--config").partition(":")
    config = importlib.import_module(f"configs.{Path(path).stem}").get_config(arm)
    section, name = knob.split(".")
    return config[section][name]


def _run_value(config: dict, knob: str) -> object:
    section, name = knob.split(".")
    if name in config.get(section, {}):
        return config[section][name]
    flat = {f"{s}.{k}": v for s, knobs in config.items() if isinstance(knobs, dict)
            for k, v in knobs.items()}  # fmt: skip
    return meant_before(knob, flat)


COMMANDS = _train_commands()


def test_every_committed_run_has_its_command():
    assert len(COMMANDS) >= 130


@pytest.mark.parametrize("knob", KNOBS)
def test_committed_commands_reproduce_the_knob(knob):
    checked = 0
    for path, argv in COMMANDS:
        run = path.parent / Path(_flag(argv, "--workdir")).name  # /tmp/... reruns: beside it
        config_file = run / "config.json"
        if not config_file.is_file():
            continue  # a run not committed (a seed's view, a rerun left out)
        ran = _run_value(json.loads(config_file.read_text()), knob)
        assert _command_value(argv, knob) == ran, (str(path), run.name, knob, ran)
        checked += 1
    assert checked >= 130
