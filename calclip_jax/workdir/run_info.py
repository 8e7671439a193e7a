"""run_info.json: what produced a run, one record per start of its process (a resume adds one):
the git commit of the code (and whether the checkout had uncommitted changes), the Python and
package versions, the host, its CPU and the time. The CPU matters to a rerun: XLA picks its CPU
kernels by instruction set, so the same code, config and seed gave another SFT warm start, and so
another run, on an AVX2-only AMD EPYC host than on the Intel Xeon host of the committed results."""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from calclip_jax.workdir import run_record as R

# instruction-set extensions that change XLA's CPU kernels (and so the rounding of a run)
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "asimd", "sve")
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


def cpu_description(cpuinfo: str | os.PathLike[str] = "/proc/cpuinfo") -> dict[str, Any]:
    """{"model", "cores", "isa"} of this machine's CPU; model and isa None where `cpuinfo` is
    unreadable (not Linux). `isa` lists which of ISA_FLAGS the first processor reports."""
    model, flags = None, None
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model is None:
            model = value.strip()
        elif key in ("flags", "Features") and flags is None:
            flags = set(value.split())
    isa = None if flags is None else [f for f in ISA_FLAGS if f in flags]
    return {"model": model, "cores": os.cpu_count(), "isa": isa}


def current_run_info() -> dict[str, Any]:
    """This process's record: time, git, python, packages, host, CPU."""
    return {
        "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "git": git_state(),
        "python": platform.python_version(),
        "packages": package_versions(),
        "host": platform.node(),
        "cpu": cpu_description(),
    }


def record_start(workdir: str | os.PathLike[str]) -> Path:
    """Appends this process's record to workdir/run_info.json (atomically); returns the path."""
    path = Path(workdir) / R.RUN_INFO_FILE
    starts = (R.load_run_info(workdir) or {}).get("starts", [])
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"starts": [*starts, current_run_info()]}, indent=2))
    os.replace(tmp, path)
    return path
