"""Operand dtypes of the matmuls an accelerator would compile, read from exported StableHLO.

``jax.export`` lowers a jitted function for platforms other than the local one (e.g. "cuda" and
"tpu" on a CPU-only machine); its StableHLO text names every ``dot_general``'s operand types, so
a test or benchmark can check that the GEMMs take float8 / bfloat16 operands without a GPU.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Callable, Sequence
from typing import Any

import jax

# `stablehlo.dot_general %a, %b, ... : (tensor<4x8xf8E4M3FN>, tensor<8x2xbf16>) -> ... loc(#l)`
_DOT = re.compile(
    r"stablehlo\.dot_general\b[^\n]*?:\s*\(tensor<([^>]*)>,\s*tensor<([^>]*)>\)[^\n]*?"
    r"(?:loc\((#loc\d+)\))?$",
    re.M,
)
_LOC_DEF = re.compile(r"^(#loc\d+) = loc\((.*)\)$", re.M)
_CUSTOM_CALL = re.compile(r"stablehlo\.custom_call @([\w$.]+)\(")


def _element_type(tensor_type: str) -> str:
    return tensor_type.rsplit("x", 1)[-1]


def exported_text(
    fn: Callable, *args: Any, platforms: Sequence[str] = ("cuda", "tpu"), **export_kwargs: Any
) -> str:
    """The StableHLO module of ``jax.jit(fn)`` exported for ``platforms`` (args may be
    ``jax.ShapeDtypeStruct``s)."""
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    exported = jax.export.export(jitted, platforms=list(platforms), **export_kwargs)(*args)
    return exported.mlir_module()


def dot_operand_types(stablehlo: str) -> list[tuple[str, str]]:
    """(lhs, rhs) element types of every ``dot_general`` in the module text, e.g.
    ("f8E4M3FN", "f8E5M2"), in program order."""
    return [(lhs, rhs) for lhs, rhs, _ in named_dots(stablehlo)]


def named_dots(stablehlo: str) -> list[tuple[str, str, str]]:
    """(lhs type, rhs type, op name) of every ``dot_general``; the name is the op's name stack,
    e.g. "jit(step)/transpose(jvp(Transformer))/layers_1/mlp/up_proj/dot_general" ("" without
    debug locations)."""
    locs = dict(_LOC_DEF.findall(stablehlo))
    return [
        (_element_type(a), _element_type(b), _loc_name(loc, locs))
        for a, b, loc in _DOT.findall(stablehlo)
    ]


def _loc_name(ref: str, locs: dict[str, str]) -> str:
    """The first quoted name of a location, following aliases (#locN) and call sites."""
    seen = set()
    while ref and ref not in seen:
        seen.add(ref)
        body = locs.get(ref, "")
        quoted = re.match(r'\s*"([^"]*)"', body)
        if quoted:
            return quoted.group(1)
        nested = re.search(r"(#loc\d+)", body)
        ref = nested.group(1) if nested else ""
    return ""


def dot_type_counts(stablehlo: str) -> collections.Counter:
    """How many dot_generals take each (lhs, rhs) operand-type pair."""
    return collections.Counter(dot_operand_types(stablehlo))


def custom_call_targets(stablehlo: str) -> list[str]:
    """Targets of the module's custom calls (e.g. a cuDNN block-scaled GEMM)."""
    return _CUSTOM_CALL.findall(stablehlo)
