"""Run the arms of a sweep as `experiments.train` subprocesses, then write the summary table.

  python -m experiments.sweep --config=configs/sweep_granularity.py --workdir=DIR [--parallel=N]

A sweep config's get_config(arg) returns a ConfigDict with `base` (a train config file, optionally
`file.py:arm`), `arms` (arm name -> overrides), optional `seeds` (arms x seeds -> `<arm>__seed<N>`)
and optional `common` overrides. Overrides are dotted keys ({"train.precision": "fp8_block"}, in a
ConfigDict built with allow_dotted_keys=True) or nested dicts; precedence common < arm < seed.
Arm `a` runs in DIR/a with its output in DIR/a/train.log; an arm whose summary.json exists is
skipped; a failing arm is reported and the others go on; the exit status is 1 if any arm failed.
DIR/summary.csv and DIR/summary.md come from calclip_jax.analysis.summary; DIR/commands.sh lists
the exact command of each arm.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from absl import app, flags
from ml_collections import ConfigDict

from calclip_jax.analysis import summary as summary_lib
from calclip_jax.analysis.run_record import is_finished
from calclip_jax.config import ConfigError
from experiments import config_cli, config_help

_CONFIG = config_cli.define_config_flag(
    "Sweep config file[:arg] (get_config(arg) -> base, arms, seeds, common); see above.",
    lock_config=False,
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Sweep directory; one subdirectory per arm.")
_PARALLEL = flags.DEFINE_integer("parallel", 1, "Arms run at the same time.")
_QUIET = flags.DEFINE_bool("quiet", False, "Print only failures and the summary path.")
_TRAIN_MODULE = flags.DEFINE_string(
    "train_module", "experiments.train", "Module run per arm (python -m), or a .py script path."
)
_ONLY = flags.DEFINE_list("only", [], "Run only these (expanded) arm names.")
_DRY_RUN = flags.DEFINE_bool("dry_run", False, "Print the commands and exit without running.")

REPO_ROOT = Path(__file__).resolve().parent.parent
LOG_NAME = "train.log"


@dataclasses.dataclass(frozen=True)
class ArmResult:
    name: str
    status: str  # finished | skipped | failed
    returncode: int | None
    seconds: float
    log_path: Path | None


def flatten_overrides(node: Any, prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}, "c.d": 2} -> {"a.b": 1, "c.d": 2} (ConfigDicts and dicts)."""
    if isinstance(node, ConfigDict):
        node = node.to_dict()
    if not isinstance(node, Mapping):
        return {prefix: node}
    out: dict[str, Any] = {}
    for key, value in node.items():
        out.update(flatten_overrides(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def expand_arms(sweep: ConfigDict) -> dict[str, dict[str, Any]]:
    """Arm name -> merged dotted overrides (common < arm < seed), seeds expanded."""
    arms = sweep.get("arms")
    if not arms:
        raise ConfigError("sweep config: `arms` is missing or empty")
    common = flatten_overrides(sweep.get("common") or {})
    seeds = list(sweep.get("seeds") or [])
    expanded: dict[str, dict[str, Any]] = {}
    for name in arms:
        if not name or "/" in name or name.startswith("."):
            raise ConfigError(f"sweep config: bad arm name {name!r}")
        overrides = {**common, **flatten_overrides(arms[name])}
        if not seeds:
            expanded[name] = overrides
        for seed in seeds:
            expanded[f"{name}__seed{seed}"] = {**overrides, "seed": int(seed)}
    return expanded


def resolve_base(base: str) -> str:
    """`base` as given when it exists from the cwd, else relative to the repo root."""
    path, sep, arg = base.partition(":")
    if Path(path).is_file():
        return base
    if (REPO_ROOT / path).is_file():
        return f"{REPO_ROOT / path}{sep}{arg}"
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


def _env() -> dict[str, str]:
    """os.environ with the repo root first on PYTHONPATH (experiments/, configs/ importable)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


def _run_arm(name: str, cmd: list[str], workdir: Path) -> ArmResult:
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / LOG_NAME
    start = time.monotonic()
    with log_path.open("a", encoding="utf-8") as f:
        f.write(f"$ {shlex.join(cmd)}\n")
        f.flush()
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=_env(), check=False)
    seconds = time.monotonic() - start
    ok = proc.returncode == 0
    return ArmResult(name, "finished" if ok else "failed", proc.returncode, seconds, log_path)


def _tail(path: Path | None, n: int = 8) -> str:
    if path is None or not path.exists():
        return ""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()[-n:]
    return "\n".join(f"    {line}" for line in lines)


def run_sweep(
    sweep: ConfigDict,
    workdir: str | Path,
    *,
    parallel: int = 1,
    train_module: str = "experiments.train",
    quiet: bool = False,
    only: Iterable[str] = (),
    dry_run: bool = False,
    python: str = sys.executable,
    log: Callable[[str], None] = print,
) -> list[ArmResult]:
    """Runs every unfinished arm, then writes DIR/summary.{csv,md}; returns one result per arm."""
    workdir = Path(workdir)
    arms = expand_arms(sweep)
    only = list(only)
    unknown = sorted(set(only) - set(arms))
    if unknown:
        raise ConfigError(f"--only names unknown arms {unknown}; arms: {list(arms)}")
    if only:
        arms = {name: arms[name] for name in arms if name in only}
    base = resolve_base(str(sweep.base))
    commands = {
        name: train_command(train_module, base, workdir / name, overrides, python)
        for name, overrides in arms.items()
    }
    if dry_run:
        for cmd in commands.values():
            log(shlex.join(cmd))
        return []
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "commands.sh").write_text(
        "".join(f"{shlex.join(c)}\n" for c in commands.values()), encoding="utf-8"
    )
    lock = threading.Lock()

    def say(msg: str, always: bool = False) -> None:
        if always or not quiet:
            with lock:
                log(msg)

    results: dict[str, ArmResult] = {}
    todo = []
    for name in arms:
        if is_finished(workdir / name):
            say(f"[sweep] skip {name}: finished (summary.json exists)")
            results[name] = ArmResult(name, "skipped", None, 0.0, None)
        else:
            todo.append(name)

    def job(name: str) -> ArmResult:
        say(f"[sweep] start {name}")
        res = _run_arm(name, commands[name], workdir / name)
        if res.status == "failed":
            say(
                f"[sweep] FAILED {name} (exit code {res.returncode}, {res.seconds:.1f} s); "
                f"log {res.log_path}:\n{_tail(res.log_path)}",
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


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    if _CONFIG.value is None or not _WORKDIR.value:
        raise app.UsageError("--config and --workdir are required")
    try:
        results = run_sweep(
            _CONFIG.value,
            _WORKDIR.value,
            parallel=_PARALLEL.value,
            train_module=_TRAIN_MODULE.value,
            quiet=_QUIET.value,
            only=_ONLY.value,
            dry_run=_DRY_RUN.value,
        )
    except ConfigError as err:
        sys.exit(f"error: {err}")
    if any(r.status == "failed" for r in results):
        sys.exit(1)


if __name__ == "__main__":
    app.run(
        main,
        flags_parser=config_cli.flags_parser(help_text=lambda: config_help.catalogue("sweep")),
    )
