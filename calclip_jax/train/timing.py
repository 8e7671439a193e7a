"""Where a run's time goes: seconds JAX spends compiling, and the progress of a long loop.

Compile time (tracing, lowering to MLIR, XLA compilation), apart from running: a process-wide
listener on `jax.monitoring` duration events adds them up; `compile_seconds()` reads the running
total and `timed()` measures a block's wall time and the compile time in it. `Progress`: a tqdm
bar on a terminal, else one plain line every `every_s` seconds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

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


class Progress:
    """`update(n, **postfix)` per iteration, `close()` at the end; silent when not `enabled`.

    On a TTY (`stream.isatty()`) a tqdm bar; otherwise (CI, a log file) a line
    "<desc> i/total (p%) k=v ..." through `log` at most every `every_s` seconds, and at the end.
    """

    def __init__(
        self,
        total: int,
        desc: str,
        *,
        enabled: bool = True,
        log: Callable[[str], None] = print,
        every_s: float = 30.0,
        stream: TextIO | None = None,
    ) -> None:
        self.total, self.desc, self.enabled, self.log, self.every_s = (
            total, desc, enabled, log, every_s,
        )  # fmt: skip
        self.done, self._postfix = 0, {}
        self._last = time.monotonic()
        stream = sys.stderr if stream is None else stream
        self._bar = None
        if enabled and stream.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc, dynamic_ncols=True, file=stream)

    def update(self, n: int = 1, **postfix: Any) -> None:
        if not self.enabled:
            return
        self.done += n
        self._postfix = postfix
        if self._bar is not None:
            self._bar.update(n)
            if postfix:
                self._bar.set_postfix(postfix, refresh=False)
        elif time.monotonic() - self._last >= self.every_s:
            self._line()

    def _line(self) -> None:
        self._last = time.monotonic()
        pct = 100 * self.done / max(self.total, 1)
        extra = "".join(f" {k}={v}" for k, v in self._postfix.items())
        self.log(f"{self.desc} {self.done}/{self.total} ({pct:.0f}%){extra}")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self.enabled and self.done:
            self._line()
