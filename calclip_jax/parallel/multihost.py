"""Multi-process (multi-host) helpers; each is a no-op or a plain copy with one process.

Every process runs the same program on the same host data (all randomness derives from
(seed, step)), so host NumPy inputs become global arrays by `jax.device_put` with a mesh
sharding (see `sharded.jit_update_step`), and global results come back to every host with
`to_host`. Process 0, the leader, is the only writer of run outputs and shared caches.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils


def is_leader() -> bool:
    """True on process 0, the one process that writes logs, summaries and shared caches."""
    return jax.process_index() == 0


def sync(name: str) -> None:
    """Barrier across all processes (every process must call it, in the same order)."""
    if jax.process_count() > 1:
        multihost_utils.sync_global_devices(name)


def leader_says(value: bool) -> bool:
    """The leader's `value` on every process (a collective: every process must call it)."""
    if jax.process_count() == 1:
        return value
    return bool(multihost_utils.broadcast_one_to_all(np.int32(value)))


@contextlib.contextmanager
def leader_first(name: str) -> Iterator[None]:
    """The leader runs the block, then the others do (build a cache once, then read it).

    The leader reaches the barrier even when its block raises, so the others do not wait
    forever.
    """
    if jax.process_count() == 1:
        yield
    elif is_leader():
        try:
            yield
        finally:
            sync(name)
    else:
        sync(name)
        yield


def to_host(x: Any) -> np.ndarray:
    """The global value of `x` as NumPy on every process (a collective when `x` is split
    over devices of several processes)."""
    if isinstance(x, jax.Array) and not (x.is_fully_addressable or x.is_fully_replicated):
        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)


def tree_to_host(tree: Any) -> Any:
    return jax.tree.map(to_host, tree)
