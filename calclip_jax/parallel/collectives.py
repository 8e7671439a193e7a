"""The collectives of a compiled program, read from its optimized HLO text (`compiled.as_text()`).

One `Collective` per collective instruction (all-reduce, all-gather, reduce-scatter, all-to-all,
collective-permute, and their async `-start` halves; `-done` halves are not counted again) with
the array shapes of its result. Invariant: `result_bytes` counts each result array once, per
device (an SPMD program's shapes are one device's), so an all-gather of a `[k, n]` shard to
`[8k, n]` counts `8k * n` elements, a reduce-scatter's result its shard.
"""

from __future__ import annotations

import dataclasses
import math
import re

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
ITEM_BYTES = {
    "pred": 1, "s8": 1, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1, "f8e4m3fnuz": 1, "f8e5m2fnuz": 1,
    "f8e4m3": 1, "f8e8m0fnu": 1, "bf16": 2, "f16": 2, "s16": 2, "u16": 2,
    "f32": 4, "s32": 4, "u32": 4, "f64": 8, "s64": 8, "u64": 8, "c64": 8, "c128": 16,
}  # fmt: skip
_INSTR = re.compile(
    r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(?P<result>.+?)\s+"
    rf"(?P<kind>{'|'.join(KINDS)})(?P<start>-start)?\(",
    re.M,
)
_ARRAY = re.compile(r"\b([a-z][a-z0-9]*)\[([\d,]*)\]")
_OP_NAME = re.compile(r'op_name="([^"]*)"')


@dataclasses.dataclass(frozen=True)
class Collective:
    """One collective instruction: its kind and its result arrays as (element type, shape)."""

    kind: str
    arrays: tuple[tuple[str, tuple[int, ...]], ...]
    op_name: str = ""  # the jax op it came from (the instruction's metadata), when recorded

    @property
    def result_bytes(self) -> int:
        return sum(ITEM_BYTES.get(t, 4) * math.prod(s) for t, s in self.arrays)

    def has_dim(self, dims: set[int]) -> bool:
        """Whether any result array has a dimension in `dims`."""
        return any(d in dims for _, shape in self.arrays for d in shape)


def _result_arrays(result: str, kind: str, start: bool) -> list[tuple[str, tuple[int, ...]]]:
    arrays = [(t, tuple(int(d) for d in s.split(",") if d)) for t, s in _ARRAY.findall(result)]
    if start and kind in ("all-gather", "collective-permute"):
        # async start: (operands, results[, contexts]): the results are the second group
        n = len(arrays)
        arrays = arrays[n // 2 : n] if kind == "all-gather" else arrays[1:2]
    return arrays


def collectives(hlo_text: str) -> list[Collective]:
    """Every collective of an optimized HLO module text, in program order."""
    found = []
    for m in _INSTR.finditer(hlo_text):
        line_end = hlo_text.find("\n", m.end())
        op = _OP_NAME.search(hlo_text, m.end(), None if line_end < 0 else line_end)
        arrays = tuple(_result_arrays(m["result"], m["kind"], bool(m["start"])))
        found.append(Collective(m["kind"], arrays, op[1] if op else ""))
    return found


def summary(found: list[Collective]) -> dict[str, dict[str, int]]:
    """kind -> {"count", "bytes"} (result bytes per device), for the kinds present."""
    out: dict[str, dict[str, int]] = {}
    for c in found:
        entry = out.setdefault(c.kind, {"count": 0, "bytes": 0})
        entry["count"] += 1
        entry["bytes"] += c.result_bytes
    return out
