"""One arm's command line (`python -m <train module> --config=<base> --config.<key>=<value>`),
and the sweep's commands.sh listing every arm's: a sweep run on some arms (`--only`, another
phase's seeds) replaces their lines and keeps the others'."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from calclip_jax.config import ConfigError

COMMANDS_FILE = "commands.sh"  # in the sweep folder: one arm's command a line


def resolve_base(base: str, repo_root: str | Path | None = None) -> str:
    """`base` as given when it exists from the cwd, else relative to `repo_root` (if given)."""
    path, sep, arg = base.partition(":")
    if Path(path).is_file():
        return base
    if repo_root is not None and (Path(repo_root) / path).is_file():
        return f"{Path(repo_root) / path}{sep}{arg}"
    raise ConfigError(f"sweep config: base={base!r} is not a file")


def format_override(value: Any) -> str:
    """Value text for `--config.key=value` (bools lower-case, sequences as Python literals)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return repr(tuple(value))
    return str(value)


def train_command(
    train_module: str, base: str, workdir: Path, overrides: Mapping[str, Any], python: str
) -> list[str]:
    """argv of one arm: `python -m <module>` (or `python <script.py>`) with config overrides."""
    runner = [train_module] if train_module.endswith(".py") else ["-m", train_module]
    args = [f"--config={base}", f"--workdir={workdir}"]
    args += [f"--config.{k}={format_override(v)}" for k, v in overrides.items()]
    return [python, *runner, *args]


def _workdir(command: Sequence[str]) -> str | None:
    """The `--workdir=` of an arm's argv (None without one)."""
    found = [a.partition("=")[2] for a in command if a.startswith("--workdir=")]
    return found[-1] if found else None


def write_commands(sweep_dir: Path, commands: Sequence[list[str]]) -> Path:
    """<sweep_dir>/commands.sh: each command shell-quoted on its own line. A line already there
    for another workdir is kept (in its place); one for the same workdir is replaced there; new
    ones are appended."""
    path = sweep_dir / COMMANDS_FILE
    new = {_workdir(c): c for c in commands}
    old = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    lines, written = [], set()
    for line in old:
        workdir = _workdir(shlex.split(line)) if line.strip() else None
        if workdir is not None and workdir in new:
            lines.append(shlex.join(new[workdir]))
            written.add(workdir)
        elif line.strip():
            lines.append(line)
    lines += [shlex.join(c) for c in commands if _workdir(c) not in written]
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path
