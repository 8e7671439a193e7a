"""The carry kit of the prepared GPU run (`benchmarks.gpu_kit`, `benchmarks.gpu_shapes`,
`benchmarks/gpu_device_command.sh`): the device command fits the tool and names only what the
kit carries; the Requires-Dist walk finds what an image lacks; a shapes file inflates into a GGUF
of the real model's config and tokenizer, which gpu_run's rl section runs. No network: the
wheels themselves are fetched by `python -m benchmarks.gpu_kit`, not here."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from packaging.requirements import Requirement
from shipped_model import shipped_gguf
from subprocess_env import one_device_env

from benchmarks import gpu_kit
from benchmarks.gpu_shapes import (
    SHAPES_FILE,
    SHAPES_KEY,
    inflate,
    is_shapes_file,
    shapes_summary,
    write_shapes,
)

REPO = Path(__file__).resolve().parents[2]
COMMAND_FILE = REPO / "benchmarks" / "gpu_device_command.sh"
RUN_LIMIT_S = 600  # the device tool's longest command
COMMAND_CHARS = 2000  # the device tool's longest command line
INSTALL_S = 60  # what the wheel install and python's start may take before gpu_run's clock


def device_command() -> tuple[str, dict[str, str]]:
    """(the command: the file's non-comment lines joined by spaces, {"carry": ..,
    "timeout_s": ..} from its `# key: value` lines)."""
    lines = COMMAND_FILE.read_text().splitlines()
    settings = dict(
        re.fullmatch(r"# (carry|timeout_s): (.+)", line).groups()
        for line in lines
        if re.fullmatch(r"# (carry|timeout_s): (.+)", line)
    )
    command = " ".join(line for line in lines if line.strip() and not line.startswith("#"))
    return command, settings


def test_device_command_fits_and_names_only_what_the_kit_carries():
    command, settings = device_command()
    assert len(command) < COMMAND_CHARS, len(command)
    carry = settings["carry"].split()
    assert carry == list(gpu_kit.CARRY)
    install = (
        "python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade "
        "--target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site"
    )  # the device README's install command
    assert command.startswith(install)
    for path in carry:  # carried paths must be ignored by git, or they would travel twice
        ignored = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", f"{path}/"])
        assert ignored.returncode == 0, f"{path} is not ignored by git"
    words = shlex.split(command.replace(";", " ").replace("|", " "))
    dot_paths = [w.split("=")[-1] for w in words if re.match(r"(--\w+=)?\.\w", w)]
    assert dot_paths, command
    for path in dot_paths:  # every checkout-relative hidden path lies in a carried folder
        assert path.split("/")[0] in carry, path
    assert f"--rl_checkpoint={SHAPES_FILE}" in command
    assert "PYTHONUNBUFFERED=1" in command and "--out=$OUT" in command
    assert command in (REPO / "docs" / "measurements.md").read_text()  # the documented call
    # gpu_run's flags in it exist, and its deadline leaves the install its time
    gpu_run = (REPO / "benchmarks" / "gpu_run.py").read_text()
    defined = set(re.findall(r'DEFINE_\w+\(\s*"(\w+)"', gpu_run))
    run_flags = dict(re.findall(r"--(\w+)=(\S+)", command.partition("benchmarks.gpu_run")[2]))
    assert set(run_flags) <= defined, set(run_flags) - defined
    timeout_s = int(settings["timeout_s"])
    assert timeout_s <= RUN_LIMIT_S
    assert float(run_flags["deadline_s"]) + INSTALL_S <= timeout_s


def make_wheel(folder: Path, name: str, version: str, requires: list[str]) -> Path:
    path = folder / f"{name}-{version}-py3-none-any.whl"
    meta = "\n".join([f"Name: {name}", f"Version: {version}"])
    meta += "".join(f"\nRequires-Dist: {r}" for r in requires)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}-{version}.dist-info/METADATA", meta + "\n")
    return path


def test_walk_finds_what_the_image_lacks(tmp_path):
    """Through packages the image lacks, markers for Python 3.12 on Linux, extras asked of an
    image package (etils[epath]), but not an image package's own needs."""
    wheels = {
        "pkga": make_wheel(tmp_path, "pkga", "1.0", [
            "pkgb; python_version >= '3.11'",
            "pkgold; python_version < '3.9'",
            "pkgwin; sys_platform == 'win32'",
            "numpy>=1.26",
            "pkgd>=2",
            "etils[epath]",
            "pkgtest; extra == 'test'",
        ]),
        "pkgb": make_wheel(tmp_path, "pkgb", "1.0", []),
        "pkgd": make_wheel(tmp_path, "pkgd", "1.5", []),
        "etils": make_wheel(tmp_path, "etils", "1.15.0", [
            "fsspec; extra == 'epath'",
            "pkgnew; extra == 'epath'",
            "pkgbase",
        ]),
    }  # fmt: skip
    got = gpu_kit.walk(wheels.get, [Requirement("pkga")])
    assert set(got["reached"]) == {"pkga", "pkgb", "numpy", "pkgd", "etils", "fsspec", "pkgnew"}
    assert got["missing"] == ["pkgnew"]  # not on the image, no wheel; pkgbase is etils' own
    assert got["unmet"] == [("pkgd", "1.5", "pkgd>=2", "pkga")]


def test_pins_are_one_version_each_of_what_the_image_lacks():
    assert all(name == gpu_kit.canonicalize_name(name) for name in gpu_kit.PINNED)
    on_image = {n for n in gpu_kit.PINNED if n in gpu_kit.IMAGE_PACKAGES}
    assert on_image == gpu_kit.OVERRIDES
    assert set(gpu_kit.PINNED) >= gpu_kit.BUILT_HERE
    roots = {gpu_kit.canonicalize_name(r.name) for r in gpu_kit.root_requirements()}
    assert {"tensorflow-datasets", "ml-collections", "gguf"} <= roots
    flax = [str(r.specifier) for r in gpu_kit.root_requirements() if r.name == "flax"]
    assert flax == [">=0.12.12"]  # Python 3.12's floor, the device's Python


@pytest.fixture(scope="module")
def shapes_file(tmp_path_factory) -> Path:
    dst = tmp_path_factory.mktemp("kit") / "smollm2_shapes.gguf"
    write_shapes(shipped_gguf(), dst)
    return dst


def test_shapes_file_inflates_to_the_real_models_config_and_tokenizer(shapes_file, tmp_path):
    from calclip_jax.data.gguf_tokenizer import GGUFTokenizer
    from calclip_jax.gguf_file import open_gguf
    from calclip_jax.model.gguf_import import gguf_config

    real = shipped_gguf()
    assert shapes_file.stat().st_size < 3 * 2**20  # the real file: 98 MB
    assert is_shapes_file(shapes_file) and not is_shapes_file(real)
    summary = shapes_summary(shapes_file)
    assert summary["layers"] == 30 and summary["tensors"] == 272
    assert 134e6 < summary["params"] < 135e6
    full = inflate(shapes_file, tmp_path / "full.gguf")
    assert gguf_config(full) == gguf_config(real)
    one = inflate(shapes_file, tmp_path / "one.gguf", n_layers=1)
    assert gguf_config(one).n_layers == 1
    reader = open_gguf(one)
    assert SHAPES_KEY not in reader.fields
    tensors = {t.name: t for t in reader.tensors}
    assert {t.tensor_type.name for t in tensors.values()} == {"F16"}
    assert np.all(np.asarray(tensors["output_norm.weight"].data) == 1)
    embed = np.asarray(tensors["token_embd.weight"].data, np.float32)
    assert embed.shape == (49152, 576) and 0.019 < embed.std() < 0.021
    chat = [{"role": "user", "content": "Compute 46 + 22. Reply with only the result, no words."}]
    want, got = GGUFTokenizer.from_gguf(str(real)), GGUFTokenizer.from_gguf(str(one))
    assert got.encode_chat(chat) == want.encode_chat(chat) and got.eos_id == want.eos_id


def test_gpu_run_rl_runs_random_weights_at_the_real_shapes(shapes_file, tmp_path):
    """The rl section on a shapes file: a 1-layer random model at SmolLM2's shapes (float32
    arms: the cheapest on this CPU), every row saying so."""
    cmd = [sys.executable, "-m", "benchmarks.gpu_run", f"--out={tmp_path}", "--smoke"]
    cmd += ["--sections=rl", "--rl_arms=bf16", f"--rl_checkpoint={shapes_file}"]
    cmd += ["--rl_set=rollout.precision=fp32", "--rl_set=train.precision=fp32"]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, check=False, timeout=600, env=one_device_env()
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((tmp_path / "gpu_run.json").read_text())
    (row,) = data["sections"]["rl"]["rows"]
    assert "error" not in row, row
    assert row["step_ms"] > 0 and row["rows"] == 8
    assert row["weights"].startswith("random") and "1 of 30 layers" in row["weights"]
    assert row["model"].endswith("smollm2_shapes_random.gguf")
    assert data["header"]["settings"]["rl_checkpoint"] == str(shapes_file)


def test_gemm_and_step_run_without_the_carried_wheels(tmp_path):
    """Where the kit's wheels did not install on the device: gemm and step still run, and rl
    records which import it lacked (ml_collections, tensorflow-datasets, gguf blocked here)."""
    code = (
        "import runpy, sys\n"
        "for name in ('ml_collections', 'tensorflow_datasets', 'gguf', 'tensorboardX'):\n"
        "    sys.modules[name] = None  # import raises\n"
        f"sys.argv = ['gpu_run', '--out={tmp_path}', '--smoke', '--presets=bf16,fp8_block']\n"
        "runpy.run_module('benchmarks.gpu_run', run_name='__main__')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, text=True, check=False, timeout=600, env=one_device_env(),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    sections = json.loads((tmp_path / "gpu_run.json").read_text())["sections"]
    for name in ("gemm", "step"):
        assert sections[name]["status"] == "done"
        assert [r["preset"] for r in sections[name]["rows"]] == ["bf16", "fp8_block"]
        for row in sections[name]["rows"]:
            assert "import" not in row.get("error", ""), row
    assert all("fwd_bwd_ms" in r for r in sections["gemm"]["rows"])
    assert sections["rl"]["status"].startswith("error: ModuleNotFoundError: import of ml_coll")
