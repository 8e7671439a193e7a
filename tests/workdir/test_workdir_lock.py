"""WorkdirLock: one holder at a time; a dead holder's lock is taken over, others refused."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from calclip_jax.workdir.lock import LOCK_FILE, WorkdirBusyError, WorkdirLock


def test_second_holder_is_refused_naming_the_first(tmp_path):
    with WorkdirLock(str(tmp_path)).acquire(print):
        with pytest.raises(WorkdirBusyError, match=f"pid {os.getpid()} on host"):
            WorkdirLock(str(tmp_path)).acquire(print)
        # another process too
        probe = (
            "import sys; from calclip_jax.workdir.lock import WorkdirLock\n"
            f"try: WorkdirLock({str(tmp_path)!r}).acquire(print)\n"
            "except Exception as e: sys.exit(str(e))\n"
        )
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
        assert done.returncode != 0 and f"pid {os.getpid()}" in done.stderr
    said: list[str] = []
    with WorkdirLock(str(tmp_path)).acquire(said.append):  # released: free again, no takeover
        pass
    assert said == [] and (tmp_path / LOCK_FILE).read_text() == ""


def test_lock_of_a_dead_pid_on_this_host_is_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / LOCK_FILE).write_text(f"{dead.pid} {socket.gethostname()}\n")
    said: list[str] = []
    with WorkdirLock(str(tmp_path)).acquire(said.append):
        assert (tmp_path / LOCK_FILE).read_text().split() == [
            str(os.getpid()),
            socket.gethostname(),
        ]
    assert len(said) == 1 and f"stale lock {tmp_path / LOCK_FILE} of pid {dead.pid}" in said[0]


@pytest.mark.parametrize("where", ["live pid", "other host"])
def test_unlocked_file_of_a_live_or_remote_holder_is_refused(tmp_path, where):
    pid, host = (os.getppid(), socket.gethostname()) if where == "live pid" else (1, "elsewhere")
    (tmp_path / LOCK_FILE).write_text(f"{pid} {host}\n")
    with pytest.raises(WorkdirBusyError, match=f"names pid {pid}"):
        WorkdirLock(str(tmp_path)).acquire(print)
    assert (tmp_path / LOCK_FILE).read_text() == f"{pid} {host}\n"
