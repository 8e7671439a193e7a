"""The environment of a run the tests launch as a subprocess: the test session's (conftest's
XLA flags and compilation cache) on one CPU device, as a user's run has."""

from __future__ import annotations

import os

FORCED_DEVICES = "--xla_force_host_platform_device_count"


def one_device_env(**extra: str) -> dict[str, str]:
    """os.environ plus `extra`, its XLA_FLAGS without the forced device count: the runs compile at
    the session's optimization level into the session's cache (shared by every test)."""
    env = {**os.environ, **extra}
    flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith(FORCED_DEVICES)]
    env["XLA_FLAGS"] = " ".join(flags)
    return env
