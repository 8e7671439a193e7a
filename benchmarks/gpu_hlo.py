"""What a compiled program holds: its custom calls, its memory, and whether an FP8 preset's
GEMMs really ran in float8 (cuBLASLt's FP8 GEMM, or cuDNN's block-scaled GEMM for MX).

Custom-call targets on a GPU: ``__cublas$lt$matmul$f8`` (cuBLASLt FP8 GEMM), ``__cublas$gemm`` /
``__cublas$lt$matmul`` (BF16 GEMMs), ``__cudnn$blockScaledDot`` / ``__op$block_scaled_dot`` (cuDNN
block-scaled MX GEMM, compute capability >= 10 only). A GEMM that XLA kept in a Triton fusion is
no custom call; ``triton_gemms`` counts those fusions.
"""

from __future__ import annotations

import collections
import re
from typing import Any

from calclip_jax.fp8.mx_cudnn import CUDNN_MX_CALL

FP8_GEMM_CALLS = ("__cublas$lt$matmul$f8", "__cudnn$blockScaledDot", CUDNN_MX_CALL)
NOT_ON_GPU = "not applicable on {backend}"


def custom_calls(hlo: str) -> dict[str, int]:
    """Count of each custom-call target in compiled HLO text."""
    return dict(collections.Counter(re.findall(r'custom_call_target="([^"]+)"', hlo)))


def triton_gemms(hlo: str) -> int:
    """Fusions XLA emitted as Triton GEMMs (no custom call: cuBLAS never saw them)."""
    return len(re.findall(r'"kind":"__triton_gemm"', hlo))


def fp8_gemm_check(calls: dict[str, int], backend: str) -> dict[str, Any]:
    """Whether a compiled FP8 program holds float8 GEMM custom calls: "ok", "missing" (with every
    custom call it holds instead) or, off a GPU, "not applicable on <backend>"."""
    if backend != "gpu":
        return {"status": NOT_ON_GPU.format(backend=backend)}
    found = sum(calls.get(name, 0) for name in FP8_GEMM_CALLS)
    if found:
        return {"status": "ok", "fp8_gemms": found}
    return {"status": "missing", "fp8_gemms": 0, "calls_found": calls}


def compiled_memory(compiled: Any) -> dict[str, float]:
    """GiB of the compiled program's buffers (XLA's memory analysis)."""
    m = compiled.memory_analysis()
    fields = ("argument", "output", "temp", "generated_code")
    return {f: round(getattr(m, f"{f}_size_in_bytes", 0) / 2**30, 3) for f in fields}
