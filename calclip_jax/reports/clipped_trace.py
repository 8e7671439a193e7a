"""A run's clipped-token trace (`log.trace_dumps`), read from its folder: for every trace file
(step t) and every earlier dump s in it, `analysis.clipped_trace`'s groups of step s's tokens and
their mean log-prob change logp_t - old_logp_full, with lag t - s.

Step s's lower bound: the `clip_lower` its metrics row logged (the bound of its last update: the
carried, calibrated one in a calibrating arm), else the static 1 - eps_low of config.json.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np

from calclip_jax.analysis.clipped_trace import GroupShift, group_shifts, shadow_after
from calclip_jax.analysis.paired import N_BOOT
from calclip_jax.workdir import run_record as R
from calclip_jax.workdir.ratio_dumps import dump_steps, load_dump, load_trace, trace_steps


@dataclasses.dataclass(frozen=True)
class TraceRow:
    """One group of step s's tokens under the policy after step t."""

    s: int
    t: int
    lower: float  # step s's lower clip bound
    shift: GroupShift

    @property
    def lag(self) -> int:
        return self.t - self.s


def lower_bounds(workdir: str | Path, steps: list[int]) -> dict[int, float]:
    """Step -> its lower clip bound: the logged `clip_lower`, else the static bound (config.json;
    RunRecordError when it is needed and missing)."""
    logged = {r["step"]: r.get("clip_lower") for r in R.read_metrics(workdir)}
    bounds, static = {}, None
    for s in steps:
        value = logged.get(s)
        if isinstance(value, int | float) and math.isfinite(value):
            bounds[s] = float(value)
            continue
        if static is None:
            static = R.clip_bounds(workdir)[0]
        bounds[s] = static
    return bounds


@dataclasses.dataclass(frozen=True)
class TraceEntry:
    """Step s's dump under the policy after step t: dlogp = logp_t - old_logp_full [B, T], and
    the BF16 shadow's change after step s (`analysis.clipped_trace.shadow_after`; None where
    the run predates the shadow trace)."""

    s: int
    t: int
    lower: float  # step s's lower clip bound
    dlogp: np.ndarray
    dump: dict[str, np.ndarray]
    shadow_after: np.ndarray | None


def trace_entries(workdir: str | Path, last_step: int | None = None) -> list[TraceEntry]:
    """Every (t, s) of the run's traces with t up to `last_step`, by t then s; ValueError naming
    the file when a traced dump is gone or lacks old_logp_full."""
    found = trace_steps(workdir, last_step)
    traces = {t: load_trace(path) for t, path in found.items()}
    shadows = {t: load_trace(path, shadow=True) for t, path in found.items()}
    dumps = dump_steps(workdir)
    needed = sorted({s for trace in traces.values() for s in trace})
    bounds = lower_bounds(workdir, needed)
    loaded: dict[int, dict[str, np.ndarray]] = {}
    entries = []
    for t, trace in traces.items():
        for s, logp in trace.items():
            if s not in dumps:
                raise ValueError(f"{R.trace_path(workdir, t)}: the ratio dump of step {s} is gone")
            d = loaded.setdefault(s, load_dump(dumps[s]))
            if "old_logp_full" not in d:
                raise ValueError(f"{dumps[s]}: ratio dump lacks old_logp_full")
            dlogp = logp.astype(np.float64) - d["old_logp_full"]
            shadow = None
            if s in shadows[t] and "old_logp_ref_full" in d:
                shadow = shadow_after(shadows[t][s], d["old_logp_ref_full"], d["ratio_ref"])
            entries.append(TraceEntry(s, t, bounds[s], dlogp, d, shadow))
    return entries


def trace_rows(
    workdir: str | Path, n_boot: int = N_BOOT, seed: int = 0, last_step: int | None = None
) -> list[TraceRow]:
    """Every (t, s, group) of the run's traces (`trace_entries`), by t then s."""
    rows = []
    for e in trace_entries(workdir, last_step):
        d = e.dump
        shifts = group_shifts(
            e.dlogp, d["ratio"], d["advantages"], d["mask"], e.lower, n_boot, seed, e.shadow_after
        )
        rows += [TraceRow(e.s, e.t, e.lower, g) for g in shifts]
    return rows


def trace_table(rows: list[TraceRow]) -> str:
    """The rows as a Markdown table."""
    lines = [
        "Change of log-prob of step s's tokens under the policy after step t, mean over the "
        "group's tokens, since step s sampled them (logp_t - old_logp_full), since step s's "
        "updates ended (less step s's own log r), and the latter in the BF16 shadow; 90% "
        "bootstrap interval over rows.",
        "",
        "| s | t | lag | lower bound | group | tokens | since sampled | after step s | "
        "after step s, BF16 shadow |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        g = r.shift
        lines.append(
            f"| {r.s} | {r.t} | {r.lag} | {r.lower:.4g} | {g.group} | {g.tokens} | "
            f"{g.shift.fmt(digits=3)} | {g.after.fmt(digits=3)} | {g.shadow_after.fmt(digits=3)} |"
        )
    return "\n".join(lines)
