"""Helpers of the `profile_*` scripts: XLA op times from a `jax.profiler` trace, by op kind, by
compiled program and by the model code behind each op. Not a script; it defines no flags.

XLA-CPU records one trace event per executed op (thunk), named by the HLO instruction and
tagged with its program (`hlo_module`); an op's kind is its name without the numeric suffix
(`ynn_fusion.12` -> `ynn_fusion`: the GEMM fusions; `copy_bitcast_fusion` /
`transpose_copy_fusion` / `copy` are layout copies). The code behind an op is the `op_name`
metadata of the instruction in the compiled HLO (`Transformer/L/attn/...`, layer indices
dropped), read from the programs' text: `op_sources` for one program's `as_text()`, or
`dumped_sources` for every program of a run compiled with `xla_dump_flags`.
"""

from __future__ import annotations

import collections
import glob
import gzip
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import jax

NOT_OPS = ("Thunk", "Pjit", "PjRt", "Slinky")  # dispatch and thread-pool events, not XLA ops

# {kind name: (ms per call, times per call)}
OpTimes = dict[str, tuple[float, float]]


def op_kind(name: str) -> str:
    """An XLA op's kind: its name without the numeric suffix (`ynn_fusion.12` -> `ynn_fusion`)."""
    return re.sub(r"\.\d+$", "", name)


def op_sources(hlo_text: str) -> dict[str, str]:
    """{op name: `op_name` metadata, its jit prefix and layer index dropped} of compiled HLO."""
    sources = {}
    for line in hlo_text.splitlines():
        m = re.match(r'\s*(?:ROOT )?%?([\w.\-]+) = .*?op_name="([^"]+)"', line)
        if m:
            sources[m.group(1)] = re.sub(r"layers_\d+", "L", m.group(2).split("/", 1)[-1])
    return sources


_COMPUTATION = re.compile(r"^%?([\w.\-]+) \(.*\) -> .* \{$")
_CALLS = re.compile(r"(?:calls|to_apply|body|condition)=%?([\w.\-]+)")


def gemm_ops(hlo_text: str) -> set[str]:
    """Names of the entry's and loops' instructions of compiled HLO that run a GEMM: a `dot` or
    `convolution`, or a fusion / call whose computation holds one."""
    bodies: dict[str, list[str]] = {}
    current = None
    for line in hlo_text.splitlines():
        m = _COMPUTATION.match(line.removeprefix("ENTRY ").strip())
        if m:
            current = bodies.setdefault(m.group(1), [])
        elif line.startswith("}"):
            current = None
        elif current is not None:
            current.append(line)

    def is_gemm(line: str, seen: frozenset = frozenset()) -> bool:
        if re.search(r"\b(?:dot|convolution)\(", line):
            return True
        if " while(" in line:  # a loop is not itself an op of the GEMM kind
            return False
        called = [c for c in _CALLS.findall(line) if c not in seen]
        return any(is_gemm(x, seen | {c}) for c in called for x in bodies.get(c, []))

    out = set()
    for lines in bodies.values():
        for line in lines:
            m = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = ", line)
            if m and is_gemm(line):
                out.add(m.group(1))
    return out


def xla_dump_flags(dump_dir: str) -> str:
    """XLA_FLAGS that write every compiled program's optimized HLO text to `dump_dir` (set them
    before the process's first computation: the backend reads them once)."""
    return f"--xla_dump_to={dump_dir} --xla_dump_hlo_as_text --xla_dump_hlo_pass_re=^$"


def dumped_programs(dump_dir: str) -> dict[str, tuple[dict[str, str], set[str]]]:
    """{program name: (`op_sources`, `gemm_ops`) of its optimized HLO} of the programs dumped in
    `dump_dir` (a name compiled more than once: the union, the last text first)."""
    out: dict[str, tuple[dict[str, str], set[str]]] = {}
    for path in sorted(glob.glob(f"{dump_dir}/*after_optimizations.txt")):
        with open(path) as f:
            text = f.read()
        m = re.match(r"HloModule ([\w.\-]+)", text)
        if m:
            sources, gemms = out.get(m.group(1), ({}, set()))
            out[m.group(1)] = (sources | op_sources(text), gemms | gemm_ops(text))
    return out


def trace_ops(trace_dir: str) -> Iterator[tuple[str, str, float]]:
    """(program name, op name, microseconds) of every XLA op event in the trace in `trace_dir`."""
    (path,) = glob.glob(f"{trace_dir}/**/*.trace.json.gz", recursive=True)
    with gzip.open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    for e in events:
        name = e["name"]
        if name.startswith(("$", "end: ")) or any(s in name for s in NOT_OPS):
            continue
        yield (e.get("args") or {}).get("hlo_module", "?"), name, e["dur"]


def op_times(
    ops: list[tuple[str, str, float]], calls: int, kind_of: Callable[[str, str], str]
) -> OpTimes:
    """{`kind_of(program, op name)`: (ms per call, times per call)} of `trace_ops` events."""
    total_us, count = collections.defaultdict(float), collections.Counter()
    for module, name, dur in ops:
        kind = kind_of(module, name)
        total_us[kind] += dur
        count[kind] += 1
    return {k: (total_us[k] / calls / 1e3, count[k] / calls) for k in total_us}


def op_time_per_kind(
    trace_dir: str, calls: int, kind_of: Callable[[str], str] = op_kind
) -> OpTimes:
    """{`kind_of(op name)`: (ms per call, times per call)} from the trace in `trace_dir`."""
    return op_times(list(trace_ops(trace_dir)), calls, lambda _, name: kind_of(name))


@contextmanager
def traced() -> Iterator[list[tuple[str, str, float]]]:
    """A `jax.profiler` trace of the block; the list it yields holds its `trace_ops` after."""
    ops: list[tuple[str, str, float]] = []
    with tempfile.TemporaryDirectory() as trace_dir:
        jax.profiler.start_trace(trace_dir)
        try:
            yield ops
        finally:
            jax.profiler.stop_trace()
        ops.extend(trace_ops(trace_dir))


def traced_op_kinds(
    run: Callable[[int], None], calls: int, kind_of: Callable[[str], str] = op_kind
) -> OpTimes:
    """`op_time_per_kind` of a `jax.profiler` trace of `run(0)` ... `run(calls - 1)`."""
    with traced() as ops:
        for i in range(calls):
            run(i)
    return op_times(ops, calls, lambda _, name: kind_of(name))


def print_op_kinds(
    kinds: OpTimes,
    unit: str,
    count_unit: str,
    per_count: int = 1,
    top: int = 12,
    what: str = "kind",
) -> None:
    """The `top` op kinds by time: ms per `unit`, share, times per `count_unit` (`per_count`
    of them in a `unit`)."""
    all_ms = sum(ms for ms, _ in kinds.values())
    print(f"op time per {unit} {all_ms:.1f} ms; by {what} (per {unit}, share, times per "
          f"{count_unit}):")  # fmt: skip
    for kind, (ms, n) in sorted(kinds.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"  {ms:7.2f} ms {ms / all_ms:6.1%} {n / per_count:7.1f}x  {kind}")


def set_xla_dump(dump_dir: str) -> None:
    """Adds `xla_dump_flags(dump_dir)` to XLA_FLAGS (before the first computation)."""
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {xla_dump_flags(dump_dir)}"
