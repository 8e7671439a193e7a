"""Another git revision's `calclip_jax`, importable next to this checkout's (for in-process A/B
benchmarks: `ab_sampler`, `ab_smollm2`). Not a script; it defines no flags."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import tarfile
from io import BytesIO
from pathlib import Path
from types import ModuleType

from calclip_jax.workdir.run_info import CODE_DIR

REV_PACKAGE = "calclip_jax_at_rev"


def import_revision(rev: str, into: Path, module: str = "rollout.sampler") -> ModuleType:
    """`calclip_jax.<module>` as of `rev`, imported from a copy under `into` as the package
    `REV_PACKAGE` (its own imports, and module names in strings, rewritten to it), so each side
    compiles its own code."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(CODE_DIR), "archive", "--format=tar", rev, "calclip_jax"],
            capture_output=True,
            check=True,
        ).stdout
    except subprocess.CalledProcessError as e:
        sys.exit(f"git archive {rev} failed: {e.stderr.decode().strip()}")
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    package = into / REV_PACKAGE
    (into / "calclip_jax").rename(package)
    own_imports = re.compile(r"^(\s*)(from|import) calclip_jax\b", re.M)
    own_names = re.compile(r"([\"'])calclip_jax\.")  # importlib.import_module("calclip_jax.x")
    for path in package.rglob("*.py"):
        text = own_imports.sub(rf"\1\2 {REV_PACKAGE}", path.read_text())
        path.write_text(own_names.sub(rf"\1{REV_PACKAGE}.", text))
    sys.path.insert(0, str(into))
    return importlib.import_module(f"{REV_PACKAGE}.{module}")
