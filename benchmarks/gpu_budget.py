"""Time limits of `gpu_run`: a per-section budget checked before each preset or arm, and a
watchdog that ends the whole process at a deadline (a compile that runs long cannot be
interrupted from Python; the files written so far stay)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable


class SectionBudget:
    """A section's seconds. `allows_another()` is False once starting one more item (a preset,
    an arm) would likely overrun: elapsed + the longest item so far > budget."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.start = time.perf_counter()
        self.longest = 0.0

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def allows_another(self) -> bool:
        return self.elapsed() + self.longest <= self.seconds

    def item_took(self, seconds: float) -> None:
        self.longest = max(self.longest, seconds)

    def skip_reason(self) -> str:
        return (
            f"section budget: {self.elapsed():.0f} s of {self.seconds:.0f} s spent, the longest "
            f"item so far took {self.longest:.0f} s"
        )


def start_deadline(
    seconds: float, on_expiry: Callable[[], None], exit_code: int = 3
) -> threading.Timer:
    """After `seconds`, runs `on_expiry` (e.g. recording why the run stopped) and ends the
    process with `exit_code`, whatever the main thread is doing; `.cancel()` the returned timer
    to call it off."""

    def expire() -> None:
        try:
            on_expiry()
        finally:
            os._exit(exit_code)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    return timer
