"""Model hyper-parameters: one frozen dataclass plus named presets."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModelConfig:
    """Llama/Qwen-family decoder sizes and options.

    `attention_bias` adds biases to q/k/v projections (Qwen2); `qk_norm` adds per-head RMSNorm on
    queries and keys before RoPE (Qwen3).
    """

    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ff: int
    rope_theta: float = 10000.0
    norm_eps: float = 1e-6
    tie_embeddings: bool = True
    qk_norm: bool = False
    attention_bias: bool = False

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "d_model",
            "n_layers",
            "n_heads",
            "n_kv_heads",
            "head_dim",
            "d_ff",
        ):
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"ModelConfig.{name} must be > 0, got {getattr(self, name)}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"ModelConfig.n_heads ({self.n_heads}) must be a multiple of "
                f"n_kv_heads ({self.n_kv_heads})"
            )
        if self.head_dim % 2:
            raise ValueError(f"ModelConfig.head_dim must be even for RoPE, got {self.head_dim}")

    @classmethod
    def preset(cls, name: str) -> ModelConfig:
        """Named sizes: tiny (CPU tests), small, qwen3_tiny (the Tunix benchmark's),
        llama3_1b, llama3_8b, qwen2_7b, qwen3_8b."""
        if name not in _PRESETS:
            raise ValueError(f"unknown model preset {name!r}; allowed: {sorted(_PRESETS)}")
        return cls(**_PRESETS[name])

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelConfig:
        """Builds a config from a mapping; unknown keys raise naming the key."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"unknown ModelConfig keys {unknown}; allowed: {sorted(names)}")
        return cls(**dict(d))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def dense_features(self) -> dict[str, tuple[int, int]]:
        """(in, out) features of each dense projection of one layer, by its module name."""
        q, kv = self.n_heads * self.head_dim, self.n_kv_heads * self.head_dim
        d, f = self.d_model, self.d_ff
        return {
            "attn/q_proj": (d, q),
            "attn/k_proj": (d, kv),
            "attn/v_proj": (d, kv),
            "attn/o_proj": (q, d),
            "mlp/gate_proj": (d, f),
            "mlp/up_proj": (d, f),
            "mlp/down_proj": (f, d),
        }


_PRESETS: dict[str, dict[str, Any]] = {
    "tiny": dict(
        vocab_size=64,
        d_model=32,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        head_dim=8,
        d_ff=64,
    ),
    "small": dict(
        vocab_size=512,
        d_model=128,
        n_layers=4,
        n_heads=4,
        n_kv_heads=2,
        head_dim=32,
        d_ff=384,
    ),
    "llama3_1b": dict(  # the shapes of Llama-3.2-1B (1.24B parameters)
        vocab_size=128256,
        d_model=2048,
        n_layers=16,
        n_heads=32,
        n_kv_heads=8,
        head_dim=64,
        d_ff=8192,
        rope_theta=500000.0,
        norm_eps=1e-5,
        tie_embeddings=True,
    ),
    "llama3_8b": dict(
        vocab_size=128256,
        d_model=4096,
        n_layers=32,
        n_heads=32,
        n_kv_heads=8,
        head_dim=128,
        d_ff=14336,
        rope_theta=500000.0,
        norm_eps=1e-5,
        tie_embeddings=False,
    ),
    "qwen2_7b": dict(
        vocab_size=152064,
        d_model=3584,
        n_layers=28,
        n_heads=28,
        n_kv_heads=4,
        head_dim=128,
        d_ff=18944,
        rope_theta=1000000.0,
        norm_eps=1e-6,
        tie_embeddings=False,
        attention_bias=True,
    ),
    "qwen3_tiny": dict(  # the Tunix GRPO benchmark's model (benchmarks/bench_grpo_step.py)
        vocab_size=128,
        d_model=128,
        n_layers=4,
        n_heads=4,
        n_kv_heads=2,
        head_dim=32,
        d_ff=384,
        rope_theta=1000000.0,
        norm_eps=1e-6,
        tie_embeddings=False,
        qk_norm=True,
    ),
    "qwen3_8b": dict(
        vocab_size=151936,
        d_model=4096,
        n_layers=36,
        n_heads=32,
        n_kv_heads=8,
        head_dim=128,
        d_ff=12288,
        rope_theta=1000000.0,
        norm_eps=1e-6,
        tie_embeddings=False,
        qk_norm=True,
    ),
}
