"""How busy the rest of the machine is (Linux /proc/stat): wait for quiet, account for noise.

On 2 shared cores one foreign busy process inflates step times by half; benchmarks wait for an
idle machine and report the CPU other processes (and the hypervisor's steal) took meanwhile.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

_HZ = os.sysconf("SC_CLK_TCK")

NOISY_CORES = 0.1  # other processes' share of the cores above which timings are inflated

Sample = tuple[float, float, float, float]  # busy s (all processes), steal s, own cpu s, wall s


def cpu_sample() -> Sample | None:
    """Busy and steal CPU seconds of the machine, this process's CPU seconds, wall time."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    busy = v[0] + v[1] + v[2] + v[5] + v[6]  # user nice system irq softirq
    steal = v[7] if len(v) > 7 else 0
    own = os.times()
    return busy / _HZ, steal / _HZ, own.user + own.system, time.perf_counter()


def cpu_noise(before: Sample | None, after: Sample | None) -> dict[str, float] | None:
    """CPU that other processes and steal took between two samples (None off Linux)."""
    if before is None or after is None:
        return None
    busy, steal, own, wall = (a - b for a, b in zip(after, before, strict=True))
    foreign = max(0.0, busy - own)
    return {
        "wall_s": round(wall, 2),
        "own_cpu_s": round(own, 2),
        "other_procs_cpu_s": round(foreign, 2),
        "other_procs_cores": round(foreign / wall, 3) if wall else 0.0,
        "steal_s": round(steal, 2),
    }


def is_noisy(noise: dict[str, float] | None) -> bool:
    """Whether other processes took more than `NOISY_CORES` during a `cpu_noise` window."""
    return bool(noise) and (noise.get("other_procs_cores") or 0.0) > NOISY_CORES


def wait_for_idle(
    max_wait_s: float,
    log: Callable[[str], None],
    window_s: float = 3.0,
    max_cores: float = 0.15,
) -> dict[str, float | bool | None]:
    """Waits until other processes use under `max_cores` over a `window_s` window, at most
    `max_wait_s`; says how long it waited and whether the machine was idle."""
    t0 = time.perf_counter()
    while True:
        a = cpu_sample()
        time.sleep(window_s)
        noise = cpu_noise(a, cpu_sample())
        if noise is None:
            return {"waited_s": 0.0, "idle": None}
        if noise["other_procs_cores"] < max_cores:
            return {"waited_s": round(time.perf_counter() - t0, 1), "idle": True}
        if time.perf_counter() - t0 >= max_wait_s:
            cores = noise["other_procs_cores"]
            log(f"machine still busy after {max_wait_s:.0f} s ({cores:.2f} cores used by others)")
            return {"waited_s": round(time.perf_counter() - t0, 1), "idle": False}
