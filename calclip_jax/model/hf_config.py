"""Translating a Hugging Face config.json (Llama, Qwen2, Qwen3) into a ModelConfig."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from calclip_jax.model.config import ModelConfig

FAMILIES = ("llama", "qwen2", "qwen3")


def _unsupported(cfg: dict[str, Any]) -> str | None:
    rope = cfg.get("rope_scaling") or {}
    rope_type = rope.get("rope_type", rope.get("type")) or (cfg.get("rope_parameters") or {}).get(
        "rope_type", "default"
    )
    if rope_type not in (None, "default"):
        return f"rope type {rope_type!r} (only plain RoPE is implemented)"
    if cfg.get("hidden_act", "silu") != "silu":
        return f"hidden_act {cfg['hidden_act']!r} (only silu)"
    if cfg.get("mlp_bias"):
        return "mlp_bias=True"
    if cfg["model_type"] == "llama" and cfg.get("attention_bias"):
        return "llama attention_bias=True (o_proj bias)"
    if cfg.get("use_sliding_window"):
        return "use_sliding_window=True"
    return None


def config_from_hf(cfg: dict[str, Any], has_lm_head: bool = True) -> ModelConfig:
    """ModelConfig from a config.json dict; `has_lm_head` decides tying if the key is absent."""
    family = cfg.get("model_type")
    if family not in FAMILIES:
        raise ValueError(f"config.json model_type={family!r} is not supported; allowed: {FAMILIES}")
    problem = _unsupported(cfg)
    if problem:
        raise ValueError(f"config.json: unsupported {problem}")
    heads = cfg["num_attention_heads"]
    theta = cfg.get("rope_theta") or (cfg.get("rope_parameters") or {}).get("rope_theta", 10000.0)
    return ModelConfig(
        vocab_size=cfg["vocab_size"],
        d_model=cfg["hidden_size"],
        n_layers=cfg["num_hidden_layers"],
        n_heads=heads,
        n_kv_heads=cfg.get("num_key_value_heads") or heads,
        head_dim=cfg.get("head_dim") or cfg["hidden_size"] // heads,
        d_ff=cfg["intermediate_size"],
        rope_theta=float(theta),
        norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
        tie_embeddings=bool(cfg.get("tie_word_embeddings", not has_lm_head)),
        qk_norm=family == "qwen3",
        attention_bias=family == "qwen2" or bool(cfg.get("attention_bias", False)),
    )


def read_hf_config(path: str | Path) -> dict[str, Any]:
    """The parsed config.json of a checkpoint directory."""
    file = Path(path) / "config.json"
    if not file.exists():
        raise FileNotFoundError(f"no config.json in {path}")
    return json.loads(file.read_text())
