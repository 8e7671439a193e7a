"""The benchmarks' one timing helper: wall seconds of calls, waited on (`jax.block_until_ready`).

`timed` clocks one call; `time_calls` clocks `reps` calls after `warmup` untimed ones (compile
and warm-up) and reduces them to seconds per call. Every script that times calls uses these, so
that what a published figure measured (warm-up count, repeats, median or mean, waited or not) is
spelled out at its call site by these parameters.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import jax

if TYPE_CHECKING:  # not at run time: calclip_jax.train needs ml_collections, which gpu_run's
    # gemm and step sections do without (a lent GPU lacks it unless carried)
    from calclip_jax.train import PPOUpdater

Stat = Literal["median", "mean"]


def timed(fn: Callable[..., Any], *args: Any, wait: bool = True) -> tuple[Any, float]:
    """(`fn(*args)`, its wall seconds). With `wait`, the result is waited on
    (`jax.block_until_ready`) inside the clock and returned waited on; without, the clock stops
    when `fn` returns (for a call that brings its results to the host itself)."""
    start = time.perf_counter()
    out = fn(*args)
    if wait:
        out = jax.block_until_ready(out)
    return out, time.perf_counter() - start


def time_calls(
    fn: Callable[..., Any],
    *args: Any,
    reps: int,
    warmup: int = 1,
    stat: Stat = "median",
) -> float:
    """Seconds per call of `fn(*args)`, after `warmup` untimed calls, each waited on.

    stat="median": of `reps` calls, each timed alone and waited on inside its clock.
    stat="mean": one clock around all `reps` calls, each waited on, divided by `reps`.
    """
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    if stat not in ("median", "mean"):
        raise ValueError(f"stat must be median or mean, got {stat!r}")
    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    if stat == "mean":
        start = time.perf_counter()
        for _ in range(reps):
            jax.block_until_ready(fn(*args))
        return (time.perf_counter() - start) / reps
    return statistics.median([timed(fn, *args)[1] for _ in range(reps)])


def summarize(xs: list[float]) -> dict[str, float]:
    """Median, min, max and count of per-step or per-call seconds."""
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


class PhaseClock:
    """Wall time of the updater's calls, recorded per RL step (on the instance only):
    "logprobs" (`prepare`), "update" (`update_step`) and, with `train.same_forward`, "program"
    (`update_inputs`: the forward program at a later update's parameters)."""

    def __init__(self, updater: PPOUpdater) -> None:
        self.times: dict[str, float] = {}
        calls = {"prepare": "logprobs", "update_step": "update"}
        if updater.update_config.same_forward:
            calls["update_inputs"] = "program"
        for method, phase in calls.items():
            setattr(updater, method, self._clocked(getattr(updater, method), phase))

    def _clocked(self, fn: Callable[..., Any], phase: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            out, t = timed(lambda: fn(*args, **kwargs))
            self.times[phase] = self.times.get(phase, 0.0) + t
            return out

        return call

    def take(self) -> dict[str, float]:
        out, self.times = self.times, {}
        return out
