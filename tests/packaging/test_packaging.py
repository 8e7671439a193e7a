"""pyproject.toml: only calclip_jax is installed (configs/ and experiments/ run from the repo
root), chex only where it is imported (tests), and the extras the README names."""

from __future__ import annotations

import fnmatch
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!;\[ ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_only_calclip_jax_is_a_top_level_package():
    """setuptools' find: a top-level folder with __init__.py whose name an include matches."""
    include = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {d.name for d in REPO.iterdir() if (d / "__init__.py").is_file()}
    assert {"calclip_jax", "experiments"} <= packages  # what the check must tell apart
    installed = {p for p in packages if any(fnmatch.fnmatchcase(p, pat) for pat in include)}
    assert installed == {"calclip_jax"}


def test_chex_is_a_test_dependency_only():
    project = PYPROJECT["project"]
    assert "chex" not in _names(project["dependencies"])
    assert "chex" in _names(project["optional-dependencies"]["test"])
    sources = [p for p in (REPO / "calclip_jax").rglob("*.py")]
    assert not [p for p in sources if re.search(r"^\s*(import|from) chex", p.read_text(), re.M)]


def test_extras():
    extras = {k: _names(v) for k, v in PYPROJECT["project"]["optional-dependencies"].items()}
    assert {"safetensors", "tokenizers"} <= extras["hf"]
    assert not {"torch", "transformers"} & extras["hf"]  # test oracles only
    assert {"jupyterlab", "ipykernel"} <= extras["notebooks"]
    assert "tensorboard" in extras["tensorboard"]


def test_wheel_holds_only_calclip_jax(tmp_path):
    cmd = [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-w", str(tmp_path)]
    subprocess.run(cmd, check=True, capture_output=True, cwd=tmp_path, timeout=600)
    (wheel,) = tmp_path.glob("calclip_jax-*.whl")
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"calclip_jax"}


def test_ci_runs_the_readme_test_command():
    """`.ci/run` runs the README's test command verbatim (the second of its two commands)."""
    readme = (REPO / "README.md").read_text()
    commands = re.findall(r"```bash\n(python3 -m venv \.venv && [^\n]+)\n```", readme)
    assert len(commands) == 2 and "pytest" in commands[1], commands
    assert f"TEST_CMD='{commands[1]}'" in (REPO / ".ci" / "run").read_text()


def test_the_drivers_marker_is_on_the_driver_directories_only(request):
    """CI's Python 3.12 leg deselects `drivers`: the tests under tests/experiments and
    tests/notebooks (tests/conftest.py marks them), checked on this session's tests."""
    for item in request.session.items:
        under = item.nodeid.split("/")[1] in ("experiments", "notebooks")
        assert (item.get_closest_marker("drivers") is not None) == under, item.nodeid


def test_ci_runs_every_test(request):
    """No test is left out of CI by a marker: the one deselection is `drivers` on Python 3.12,
    whose tests the Python 3.11 leg runs."""
    assert not [i.nodeid for i in request.session.items if i.get_closest_marker("slow")]
    ci = (REPO / ".ci" / "run").read_text()
    assert re.findall(r'^\s*PYENV_VERSION=3.12.1 leg \S+ "" "" "([^"]*)"', ci, re.M) == [
        "not drivers"
    ]
