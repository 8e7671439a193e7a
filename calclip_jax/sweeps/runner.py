"""Runs a sweep's arms as train subprocesses, then writes its summary table.

Arm `a` runs in <sweep_dir>/a with its output in <sweep_dir>/a/train.log; a finished arm
(`run_record.is_finished`) is skipped; a failing arm is reported and the others go on.
<sweep_dir>/summary.csv and summary.md come from calclip_jax.reports.summary, commands.sh
lists the exact command of each arm.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ml_collections import ConfigDict

from calclip_jax.config import ConfigError
from calclip_jax.reports import summary as summary_lib
from calclip_jax.sweeps.arms import expand_arms
from calclip_jax.sweeps.commands import resolve_base, train_command, write_commands
from calclip_jax.workdir import run_record as R
from calclip_jax.workdir.run_record import SUMMARY_FILE, is_finished


@dataclasses.dataclass(frozen=True)
class ArmResult:
    name: str
    status: str  # finished | skipped | failed
    returncode: int | None
    seconds: float
    log_path: Path | None


def subprocess_env(repo_root: str | Path | None) -> dict[str, str]:
    """os.environ with `repo_root` (if given) first on PYTHONPATH."""
    env = dict(os.environ)
    if repo_root is not None:
        paths = [str(repo_root), env.get("PYTHONPATH")]
        env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
    return env


def run_arm(name: str, cmd: list[str], workdir: Path, env: dict[str, str]) -> ArmResult:
    """Runs one arm's command in `workdir`, appending its output to workdir/train.log."""
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = R.train_log_path(workdir)
    start = time.monotonic()
    with log_path.open("a", encoding="utf-8") as f:
        f.write(f"$ {shlex.join(cmd)}\n")
        f.flush()
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, check=False)
    seconds = time.monotonic() - start
    ok = proc.returncode == 0
    return ArmResult(name, "finished" if ok else "failed", proc.returncode, seconds, log_path)


def tail(path: Path | None, n: int = 8) -> str:
    """The last `n` lines of a log, indented ("" when there is none)."""
    if path is None or not path.exists():
        return ""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()[-n:]
    return "\n".join(f"    {line}" for line in lines)


def run_sweep(
    sweep: ConfigDict,
    workdir: str | Path,
    *,
    train_module: str,
    repo_root: str | Path | None = None,
    parallel: int = 1,
    quiet: bool = False,
    only: Iterable[str] = (),
    dry_run: bool = False,
    python: str = sys.executable,
    log: Callable[[str], None] = print,
) -> list[ArmResult]:
    """Runs every unfinished arm, then writes DIR/summary.{csv,md}; returns one result per arm.
    `train_module`: run per arm (python -m), or a .py script path; `repo_root`: where a relative
    `sweep.base` may lie, put first on the arms' PYTHONPATH."""
    workdir = Path(workdir)
    arms = expand_arms(sweep)
    only = list(only)
    unknown = sorted(set(only) - set(arms))
    if unknown:
        raise ConfigError(f"--only names unknown arms {unknown}; arms: {list(arms)}")
    if only:
        arms = {name: arms[name] for name in arms if name in only}
    base = resolve_base(str(sweep.base), repo_root)
    commands = {
        name: train_command(train_module, base, workdir / name, overrides, python)
        for name, overrides in arms.items()
    }
    if dry_run:
        for cmd in commands.values():
            log(shlex.join(cmd))
        return []
    workdir.mkdir(parents=True, exist_ok=True)
    write_commands(workdir, list(commands.values()))
    env = subprocess_env(repo_root)
    lock = threading.Lock()

    def say(msg: str, always: bool = False) -> None:
        if always or not quiet:
            with lock:
                log(msg)

    results: dict[str, ArmResult] = {}
    todo = []
    for name in arms:
        if is_finished(workdir / name):
            say(f"[sweep] skip {name}: finished ({SUMMARY_FILE} exists)")
            results[name] = ArmResult(name, "skipped", None, 0.0, None)
        else:
            todo.append(name)

    def job(name: str) -> ArmResult:
        say(f"[sweep] start {name}")
        res = run_arm(name, commands[name], workdir / name, env)
        if res.status == "failed":
            say(
                f"[sweep] FAILED {name} (exit code {res.returncode}, {res.seconds:.1f} s); "
                f"log {res.log_path}:\n{tail(res.log_path)}",
                always=True,
            )
        else:
            say(f"[sweep] done {name} ({res.seconds:.1f} s)")
        return res

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        for res in pool.map(job, todo):
            results[res.name] = res
    ordered = [results[name] for name in arms]
    failed = [r.name for r in ordered if r.status == "failed"]
    rows = summary_lib.summarize_sweep(workdir, list(arms), failed=failed)
    csv_path, md_path = summary_lib.write_summary(workdir, rows)
    counts = {s: sum(r.status == s for r in ordered) for s in ("finished", "skipped", "failed")}
    say(f"[sweep] {counts}; summary: {csv_path}, {md_path}", always=True)
    return ordered
