"""Precision recipe: per role (weights, activations, gradients, lm_head, KV cache) a format, a
scale granularity and a scaling method. Validated at construction; built from presets, dicts or
ConfigDicts. The names come from ``vocabulary``."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from calclip_jax.fp8.vocabulary import (
    AMAX_REDUCES,
    FORMATS,
    FP8_PRESETS,
    GRANULARITIES,
    OPERAND_ROLES,
    PRESETS,
    ROLES,
    SCALED_FORMATS,
    SCALINGS,
)

WEIGHT_BLOCK = (128, 128)
ACTIVATION_BLOCK = (1, 128)


def _allowed(field: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{field}={value!r} is not allowed; choose one of {list(allowed)}")


@dataclasses.dataclass(frozen=True)
class TensorPrecision:
    """Format, scale granularity and scaling method of one tensor role.

    ``scaling="delayed"`` (per-tensor scales from an amax history) needs ``granularity="tensor"``
    and a scaled format; ``amax_history_len`` and ``amax_reduce`` apply to it only.
    ``block_shape`` is (rows, contraction) of a 2-D block in the contraction-last view of the
    operand; None means the role default: weights (128, 128), activations / gradients (1, 128).
    """

    dtype: str = "bf16"
    granularity: str = "tensor"
    scaling: str = "current"
    block_shape: tuple[int, int] | None = None
    pow2_scale: bool = False
    margin: float = 0.0
    amax_history_len: int = 16
    amax_reduce: str = "max"

    def __post_init__(self) -> None:
        _allowed("dtype", self.dtype, tuple(FORMATS))
        if self.granularity == "delayed":
            raise ValueError(
                "granularity='delayed' is no longer a granularity; use granularity='tensor', "
                "scaling='delayed'"
            )
        _allowed("granularity", self.granularity, GRANULARITIES)
        _allowed("scaling", self.scaling, SCALINGS)
        if self.scaling == "delayed" and (
            self.granularity != "tensor" or self.dtype not in SCALED_FORMATS
        ):
            raise ValueError(
                f"scaling='delayed' needs granularity='tensor' and a scaled format "
                f"{list(SCALED_FORMATS)}; got dtype={self.dtype!r}, "
                f"granularity={self.granularity!r}"
            )
        _allowed("amax_reduce", self.amax_reduce, AMAX_REDUCES)
        if self.block_shape is not None:
            bs = tuple(self.block_shape)
            if len(bs) != 2 or not all(isinstance(b, int) and b >= 1 for b in bs):
                msg = "is not allowed; use None or two positive ints"
                raise ValueError(f"block_shape={self.block_shape!r} {msg}")
            object.__setattr__(self, "block_shape", bs)
        if not isinstance(self.amax_history_len, int) or self.amax_history_len < 1:
            raise ValueError(f"amax_history_len={self.amax_history_len!r} must be an int >= 1")
        if not isinstance(self.margin, int | float) or not math.isfinite(self.margin):
            raise ValueError(f"margin={self.margin!r} must be a finite number")
        if not isinstance(self.pow2_scale, bool):
            raise ValueError(f"pow2_scale={self.pow2_scale!r} must be True or False")

    @property
    def is_fp8(self) -> bool:
        return self.dtype in SCALED_FORMATS

    @property
    def is_delayed(self) -> bool:
        return self.scaling == "delayed"

    @property
    def jnp_dtype(self) -> Any:
        """The storage dtype: float8_e4m3fn, float8_e5m2, float4_e2m1fn, bfloat16 or float32."""
        return FORMATS[self.dtype]

    def block_shape_for(self, role: str) -> tuple[int, int]:
        """Block shape, resolving None to the default of operand ``role``."""
        _allowed("role", role, OPERAND_ROLES)
        if self.block_shape is not None:
            return self.block_shape
        return WEIGHT_BLOCK if role == "weights" else ACTIVATION_BLOCK

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | TensorPrecision) -> TensorPrecision:
        if isinstance(d, TensorPrecision):
            return d
        d = dict(d)
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown TensorPrecision fields {sorted(unknown)}")
        if d.get("block_shape") is not None:
            d["block_shape"] = tuple(d["block_shape"])
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["block_shape"] = None if self.block_shape is None else list(self.block_shape)
        return d


FP32 = TensorPrecision("fp32")
BF16 = TensorPrecision("bf16")


def _fp8(name: str) -> tuple[TensorPrecision, TensorPrecision, TensorPrecision]:
    granularity, scaling = FP8_PRESETS[name]
    return (
        TensorPrecision("e4m3", granularity, scaling),
        TensorPrecision("e4m3", granularity, scaling),
        TensorPrecision("e5m2", granularity, scaling),
    )


@dataclasses.dataclass(frozen=True)
class PrecisionRecipe:
    """Precision of every matmul role. ``lm_head`` describes the whole output-projection matmul
    (weights and activations; its gradient uses ``gradients``); ``kv_cache`` the KV cache."""

    weights: TensorPrecision = FP32
    activations: TensorPrecision = FP32
    gradients: TensorPrecision = FP32
    lm_head: TensorPrecision = BF16
    kv_cache: TensorPrecision = BF16

    def __post_init__(self) -> None:
        for role in ROLES:
            value = getattr(self, role)
            if isinstance(value, Mapping):
                object.__setattr__(self, role, TensorPrecision.from_dict(value))
            elif not isinstance(value, TensorPrecision):
                raise ValueError(f"{role}={value!r} must be a TensorPrecision or a dict")

    @property
    def any_delayed(self) -> bool:
        return any(getattr(self, r).is_delayed for r in ROLES)

    @classmethod
    def preset(cls, name: str) -> PrecisionRecipe:
        """Named recipes: fp32, bf16 and ``vocabulary.FP8_PRESETS`` (e.g. fp8_delayed: per-tensor
        granularity, delayed scaling).

        FP8 presets: weights and activations E4M3, gradients E5M2 (the "hybrid" recipe);
        lm_head and KV cache stay BF16.
        """
        _allowed("preset", name, PRESETS)
        if name == "fp32":
            return cls(FP32, FP32, FP32, FP32, FP32)
        if name == "bf16":
            return cls(BF16, BF16, BF16, BF16, BF16)
        return cls(*_fp8(name), lm_head=BF16, kv_cache=BF16)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PrecisionRecipe:
        """From ``{"preset": name, <role>: {...overrides}}`` or a full role mapping."""
        d = dict(d)
        unknown = set(d) - set(ROLES) - {"preset"}
        if unknown:
            raise ValueError(f"unknown PrecisionRecipe fields {sorted(unknown)}; allowed {ROLES}")
        base = cls.preset(d.pop("preset")) if "preset" in d else cls()
        roles = {}
        for role, value in d.items():
            if isinstance(value, TensorPrecision):
                roles[role] = value
            else:
                merged = {**getattr(base, role).to_dict(), **dict(value)}
                roles[role] = TensorPrecision.from_dict(merged)
        return dataclasses.replace(base, **roles)

    @classmethod
    def from_config(cls, config: Any) -> PrecisionRecipe:
        """From an ml_collections ConfigDict (or a preset name string)."""
        if isinstance(config, str):
            return cls.preset(config)
        if hasattr(config, "to_dict"):
            config = config.to_dict()
        return cls.from_dict(config)

    def to_dict(self) -> dict[str, Any]:
        return {role: getattr(self, role).to_dict() for role in ROLES}
