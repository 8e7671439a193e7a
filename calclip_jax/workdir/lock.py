"""One run per workdir: an exclusive lock file (workdir/run.lock) naming its holder.

The holder keeps an flock on the file and writes "pid host" into it. A second process finds
the flock taken and refuses at once, naming the holder. A lock file left by a killed run (its
flock is gone with the process) is taken over with a log line when its pid is dead on this
host; one naming another host, or a live pid, is refused (remove the file by hand if that run
is surely gone).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from collections.abc import Callable

LOCK_FILE = "run.lock"


class WorkdirError(RuntimeError):
    """The workdir cannot be used as asked (the message says why and what to do)."""


class WorkdirBusyError(WorkdirError):
    pass


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, another user's
        return True
    return True


def _holder(text: str) -> tuple[int, str] | None:
    parts = text.split()
    if len(parts) == 2 and parts[0].isdigit():
        return int(parts[0]), parts[1]
    return None


class WorkdirLock:
    """Held from `acquire` to `release`; raises WorkdirBusyError if another run holds it."""

    def __init__(self, workdir: str) -> None:
        self.path = os.path.join(workdir, LOCK_FILE)
        self._fd: int | None = None

    def acquire(self, log: Callable[[str], None]) -> WorkdirLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 256, 0).decode(errors="replace").strip()
            os.close(fd)
            holder = _holder(text)
            who = f"pid {holder[0]} on host {holder[1]}" if holder else "another process"
            raise WorkdirBusyError(
                f"{os.path.dirname(self.path)} is in use by {who} ({self.path}); "
                "wait for it to finish or use another --workdir"
            ) from None
        try:
            self._check_stale(os.pread(fd, 256, 0).decode(errors="replace").strip(), log)
        except WorkdirBusyError:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        os.fsync(fd)
        self._fd = fd
        return self

    def _check_stale(self, text: str, log: Callable[[str], None]) -> None:
        """The flock was free: a leftover "pid host" is a run that died without releasing."""
        holder = _holder(text)
        if holder is None:
            return
        pid, host = holder
        if pid == os.getpid() and host == socket.gethostname():
            return  # this process's own, released without clearing
        if host != socket.gethostname() or _pid_alive(pid):
            where = "is alive" if host == socket.gethostname() else f"ran on host {host}"
            raise WorkdirBusyError(
                f"{self.path} names pid {pid}, which {where}, though it holds no lock; "
                "remove the file if that run is gone"
            )
        log(f"taking over the stale lock {self.path} of pid {pid} (no longer running)")

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> WorkdirLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
