"""calclip_jax.sweeps pieces the runner tests do not reach: base lookup, the arms' environment,
commands.sh and the log tail."""

import os
import shlex
from pathlib import Path

import pytest

from calclip_jax import sweeps
from calclip_jax.config import ConfigError
from calclip_jax.sweeps.commands import write_commands
from calclip_jax.sweeps.runner import subprocess_env, tail


def test_resolve_base_from_the_cwd_else_the_repo_root(tmp_path, monkeypatch):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "a.py").write_text("")
    monkeypatch.chdir(tmp_path)
    assert sweeps.resolve_base("configs/a.py:arm") == "configs/a.py:arm"
    monkeypatch.chdir(tmp_path / "configs")
    assert sweeps.resolve_base("configs/a.py:arm", tmp_path) == f"{tmp_path}/configs/a.py:arm"
    with pytest.raises(ConfigError, match="is not a file"):
        sweeps.resolve_base("configs/a.py")  # no repo root to fall back on


def test_subprocess_env_puts_the_repo_root_first(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/x")
    assert subprocess_env("/repo")["PYTHONPATH"] == os.pathsep.join(["/repo", "/x"])
    assert subprocess_env(None)["PYTHONPATH"] == "/x"
    monkeypatch.delenv("PYTHONPATH")
    assert subprocess_env("/repo")["PYTHONPATH"] == "/repo"


def test_commands_file_and_log_tail(tmp_path):
    cmds = [["py", "-m", "t", "--config.x=a b"], ["py", "t.py"]]
    path = write_commands(tmp_path, cmds)
    assert path.name == "commands.sh"
    assert [shlex.split(line) for line in path.read_text().splitlines()] == cmds
    # another run on some arms replaces their lines in place and keeps the others'
    arm = lambda name, x: ["py", "-m", "t", f"--workdir={tmp_path / name}", f"--config.x={x}"]
    write_commands(tmp_path, [arm("a", 1), arm("b", 1)])
    write_commands(tmp_path, [arm("c", 2), arm("a", 2)])
    lines = [shlex.split(line) for line in path.read_text().splitlines()]
    assert lines == [*cmds, arm("a", 2), arm("b", 1), arm("c", 2)]
    log = tmp_path / "train.log"
    log.write_text("".join(f"line {i}\n" for i in range(10)))
    assert tail(log, 2) == "    line 8\n    line 9"
    assert tail(None) == "" and tail(Path(tmp_path / "none")) == ""
