"""Progress: tqdm on a terminal, periodic plain lines elsewhere; the compile clock: compile seconds
of a block apart from its run time."""

from __future__ import annotations

import io

import jax
import jax.numpy as jnp

from calclip_jax.train.timing import Progress, timed


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_off_a_terminal():
    lines: list[str] = []
    bar = Progress(10, "sft", log=lines.append, every_s=0.0, stream=io.StringIO())
    for i in range(10):
        bar.update(1, loss=f"{i:.1f}")
    bar.close()
    assert lines[0] == "sft 1/10 (10%) loss=0.0"
    assert lines[-1] == "sft 10/10 (100%) loss=9.0"
    quiet: list[str] = []
    rare = Progress(10, "sft", log=quiet.append, every_s=3600.0, stream=io.StringIO())
    for _ in range(10):
        rare.update(1)
    rare.close()
    assert quiet == ["sft 10/10 (100%)"]  # only the closing line


def test_bar_on_a_terminal_and_silent_when_disabled():
    stream, lines = Tty(), []
    bar = Progress(4, "sft", log=lines.append, stream=stream)
    for _ in range(4):
        bar.update(1)
    bar.close()
    assert "sft: 100%" in stream.getvalue() and "4/4" in stream.getvalue() and not lines
    off = Progress(4, "sft", enabled=False, log=lines.append, stream=Tty())
    off.update(4)
    off.close()
    assert not lines


def test_compile_time_apart_from_run_time():
    f = jax.jit(lambda x: jnp.tanh(x @ x.T).sum())
    x = jnp.ones((32, 32))
    with timed() as first:
        f(x).block_until_ready()
    with timed() as second:
        f(x).block_until_ready()
    assert 0 < first.compile_s <= first.wall_s
    assert second.compile_s == 0.0
    assert "compiling" in first.describe()
