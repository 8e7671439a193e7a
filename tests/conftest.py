"""Test-session setup: 8 simulated CPU devices (before jax starts) for the sharding tests."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
