"""Test-session setup, before jax starts: 8 simulated CPU devices for the sharding tests, XLA's
CPU backend at LLVM optimization level 0, and one persistent compilation cache shared by the test
workers and the runs they launch as subprocesses.

Most test time is compilation of tiny programs. Level 0 compiles them faster (at `611ffc3`:
`tests/train/test_theta_old.py` alone: 156 s -> 121 s; the Python 3.12 suite on two workers:
684 s -> 362 s, two sharding tests fewer) and leaves XLA's own passes (fusion, layout) as
they are; runs and benchmarks keep the default level.

XLA keys each cache entry on the program, the compile options and the jax version, so a hit
returns the executable a fresh compile would have built. A cold run gains little from it; a
rerun does (at `018e760`, `test_theta_old.py`: 167 s cold, 39 s warm). One full run adds
about 55 MB; delete the directory to reclaim it. It has no size bound: with one (jax's LRU
eviction, which lists the whole directory under a file lock at every write) the Python 3.11
tests took 1274 s in CI, and 733 s without in the run after it. Set
CALCLIP_TEST_COMPILE_CACHE=0 to compile everything afresh. The runs the tests launch as
subprocesses take the same flags (less the 8 devices) and cache: `subprocess_env.one_device_env`.

Every test under tests/experiments and tests/notebooks carries the `drivers` marker: CI's Python
3.12 leg deselects them (`.ci/run`).

Hypothesis draws the same examples on every run (profile `fixed`: a failure reproduces, CI cannot
flake on a rare draw); `--hypothesis-profile=explore` draws fresh ones to search further.
"""

import os
from pathlib import Path

import pytest
from hypothesis import settings
from subprocess_env import FORCED_DEVICES

DRIVER_DIRS = ("experiments", "notebooks")  # tests of the experiment drivers, end to end

settings.register_profile("fixed", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("fixed")

os.environ.setdefault("XLA_FLAGS", f"{FORCED_DEVICES}=8 --xla_backend_optimization_level=0")

if os.environ.get("CALCLIP_TEST_COMPILE_CACHE", "1") != "0":
    _cache = Path(__file__).resolve().parent.parent / ".pytest_cache" / "jax_compilation_cache"
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(_cache))
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks the tests in DRIVER_DIRS `drivers`."""
    tests = Path(__file__).resolve().parent
    for item in items:
        path = item.path.resolve()
        if path.is_relative_to(tests) and path.relative_to(tests).parts[0] in DRIVER_DIRS:
            item.add_marker(pytest.mark.drivers)
