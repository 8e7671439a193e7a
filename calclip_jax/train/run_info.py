"""run_info.json: what produced a run, one record per start of its process (a resume adds one):
the git commit of the code (and whether the checkout had uncommitted changes), the Python and
package versions, the host and the time."""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from calclip_jax.analysis import run_record as R

PACKAGES = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "ml_dtypes", "numpy")
CODE_DIR = Path(__file__).resolve().parents[2]  # the checkout holding calclip_jax/


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(CODE_DIR), *args], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def git_state() -> dict[str, Any]:
    """{"commit": sha, "dirty": bool} of the code's checkout; None values outside a checkout."""
    commit = _git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit.strip(), "dirty": None if status is None else bool(status.strip())}


def package_versions() -> dict[str, str | None]:
    """Installed version of each of PACKAGES (None when absent)."""
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def current_run_info() -> dict[str, Any]:
    """This process's record: time, git, python, packages, host."""
    return {
        "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "git": git_state(),
        "python": platform.python_version(),
        "packages": package_versions(),
        "host": platform.node(),
    }


def record_start(workdir: str | os.PathLike[str]) -> Path:
    """Appends this process's record to workdir/run_info.json (atomically); returns the path."""
    path = Path(workdir) / R.RUN_INFO_FILE
    starts = (R.load_run_info(workdir) or {}).get("starts", [])
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"starts": [*starts, current_run_info()]}, indent=2))
    os.replace(tmp, path)
    return path
