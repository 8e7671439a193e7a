"""Progress of a loop: a tqdm bar on a terminal, else one plain line every `every_s` seconds."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO


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
