"""Multi-process (multi-host) helpers; each is a no-op or a plain copy with one process.

Every process runs the same program on the same host data (all randomness derives from
(seed, step)), so host NumPy inputs become global arrays by `to_global` (each process places the
rows of its own devices; see `sharded.jit_update_step`), and global results come back to every
host with `to_host`. Process 0, the leader, is the only writer of run outputs and shared caches.
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


def to_global(tree: Any, shardings: Any) -> Any:
    """`tree` placed with `shardings` (a matching tree): device arrays by `jax.device_put`, host
    arrays by `jax.make_array_from_process_local_data` given the full value, from which each
    process copies only the slices its own devices hold. Unlike `device_put` of a host array
    with several processes, nothing compares the processes' values (a collective per array,
    and NaN != NaN): every process must hold the same value, as the loop's (seed, step)
    streams ensure."""

    def place(x: Any, sharding: Any) -> Any:
        if isinstance(x, jax.Array) or jax.process_count() == 1:
            return jax.device_put(x, sharding)
        x = np.asarray(x)
        return jax.make_array_from_process_local_data(sharding, x, x.shape)

    return jax.tree.map(place, tree, shardings)


def lost_contact_note(err: BaseException, heartbeat_timeout_s: int, resumes_from: int) -> str:
    """What every process prints when a collective with the others fails mid-run (a process
    was lost: killed, preempted, out of memory). The coordination service then names the lost
    process ("Task N heartbeat timeout") within `heartbeat_timeout_s` and stops this one."""
    first = (str(err).splitlines() or [""])[0][:200]
    where = f"RL step {resumes_from}" if resumes_from else "the start (no checkpoint yet)"
    return (
        f"error: process {jax.process_index()} of {jax.process_count()}: a collective with the "
        f"other processes failed ({type(err).__name__}: {first}). If a process was lost, the "
        f"coordination service names it within {heartbeat_timeout_s} s and stops this one. "
        f"Rerun the same command on every process to resume from {where}."
    )


def to_host(x: Any) -> np.ndarray:
    """The global value of `x` as NumPy on every process (a collective when `x` is split
    over devices of several processes)."""
    if isinstance(x, jax.Array) and not (x.is_fully_addressable or x.is_fully_replicated):
        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)


def tree_to_host(tree: Any) -> Any:
    return jax.tree.map(to_host, tree)
