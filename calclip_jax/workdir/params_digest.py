"""A short digest of a parameter tree's exact values: whether two runs started from bitwise the
same weights (the SFT warm start differs between CPUs, by model and instruction set:
run_info.py)."""

from __future__ import annotations

import hashlib
from typing import Any

import jax
import numpy as np

from calclip_jax.parallel.multihost import to_host

DIGEST_CHARS = 16


def params_digest(params: Any) -> str:
    """sha256 over every leaf's path, dtype, shape and bytes, leaves in path order; the first
    DIGEST_CHARS hex digits."""
    h = hashlib.sha256()
    leaves = jax.tree_util.tree_leaves_with_path(params)
    for path, leaf in sorted(leaves, key=lambda pl: jax.tree_util.keystr(pl[0])):
        x = np.ascontiguousarray(to_host(leaf))
        h.update(f"{jax.tree_util.keystr(path)}:{x.dtype}:{x.shape}".encode())
        h.update(x.tobytes())
    return h.hexdigest()[:DIGEST_CHARS]
