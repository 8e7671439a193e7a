"""Seconds JAX spends compiling (tracing, lowering to MLIR, XLA compilation), apart from running.

A process-wide listener on `jax.monitoring` duration events adds them up; `compile_seconds()`
reads the running total and `timed()` measures a block's wall time and the compile time in it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Iterator

import jax

COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)

_lock = threading.Lock()
_total = 0.0
_listening = False


def _on_event(event: str, duration_s: float, **_: object) -> None:
    global _total
    if event in COMPILE_EVENTS:
        with _lock:
            _total += duration_s


def compile_seconds() -> float:
    """Compile seconds of this process since the first call (the listener starts then)."""
    global _listening
    with _lock:
        if not _listening:
            jax.monitoring.register_event_duration_secs_listener(_on_event)
            _listening = True
        return _total


@dataclasses.dataclass
class Timing:
    """A block's wall seconds and the compile seconds within them (set when the block ends)."""

    wall_s: float = 0.0
    compile_s: float = 0.0

    def describe(self) -> str:
        return f"{self.wall_s:.1f} s, of which {self.compile_s:.1f} s compiling"


@contextlib.contextmanager
def timed() -> Iterator[Timing]:
    """`with timed() as t: ...` -> t.wall_s, t.compile_s."""
    timing, c0, t0 = Timing(), compile_seconds(), time.perf_counter()
    try:
        yield timing
    finally:
        timing.wall_s = time.perf_counter() - t0
        timing.compile_s = min(compile_seconds() - c0, timing.wall_s)
