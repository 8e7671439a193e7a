"""Import of Hugging Face Llama / Qwen2 / Qwen3 checkpoints and tokenizers (no network).

HF Linear weights are [out, in]; our kernels are [in, out], so they are transposed. RoPE uses the
same rotate_half layout, so q/k need no permutation.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np
import tokenizers

from calclip_jax.model.config import ModelConfig
from calclip_jax.model.hf_config import config_from_hf, read_hf_config
from calclip_jax.model.safetensors_io import read_tensor, tensor_files, tensor_shape

IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)


def expected_tensors(cfg: ModelConfig) -> list[tuple[str, tuple[str, ...], tuple[int, ...]]]:
    """(HF name, our param path, our shape) for every tensor the config needs."""
    d, f, h = cfg.d_model, cfg.d_ff, cfg.head_dim
    q, kv = cfg.n_heads * h, cfg.n_kv_heads * h
    out = [("model.embed_tokens.weight", ("embed", "embedding"), (cfg.vocab_size, d))]
    for i in range(cfg.n_layers):
        hf, us = f"model.layers.{i}.", f"layers_{i}"
        out += [
            (hf + "input_layernorm.weight", (us, "attn_norm", "scale"), (d,)),
            (hf + "post_attention_layernorm.weight", (us, "mlp_norm", "scale"), (d,)),
            (hf + "self_attn.o_proj.weight", (us, "attn", "o_proj", "kernel"), (q, d)),
            (hf + "mlp.gate_proj.weight", (us, "mlp", "gate_proj", "kernel"), (d, f)),
            (hf + "mlp.up_proj.weight", (us, "mlp", "up_proj", "kernel"), (d, f)),
            (hf + "mlp.down_proj.weight", (us, "mlp", "down_proj", "kernel"), (f, d)),
        ]
        for name, width in (("q_proj", q), ("k_proj", kv), ("v_proj", kv)):
            out.append((hf + f"self_attn.{name}.weight", (us, "attn", name, "kernel"), (d, width)))
            if cfg.attention_bias:
                out.append((hf + f"self_attn.{name}.bias", (us, "attn", name, "bias"), (width,)))
        if cfg.qk_norm:
            for name in ("q_norm", "k_norm"):
                out.append((hf + f"self_attn.{name}.weight", (us, "attn", name, "scale"), (h,)))
    out.append(("model.norm.weight", ("final_norm", "scale"), (d,)))
    if not cfg.tie_embeddings:
        out.append(("lm_head.weight", ("lm_head", "kernel"), (d, cfg.vocab_size)))
    return out


def is_linear_weight(name: str) -> bool:
    """Whether an HF tensor is a Linear weight ([out, in] in HF, transposed in our tree)."""
    return name.endswith("_proj.weight") or name == "lm_head.weight"


def check_names(
    names: Collection[str], wanted: list[str], cfg: ModelConfig, path: Path, tied_extra: str
) -> None:
    """Raises ValueError naming the first missing or unexpected tensor.

    `tied_extra` (the output head's name) is tolerated when the config ties embeddings.
    """
    missing = [n for n in wanted if n not in names]
    if missing:
        raise ValueError(
            f"checkpoint {path} is missing tensor {missing[0]!r} ({len(missing)} missing)"
        )
    allowed = set(wanted) | ({tied_extra} if cfg.tie_embeddings else set())
    extra = [n for n in names if n not in allowed and not n.endswith(IGNORED_SUFFIXES)]
    if extra:
        raise ValueError(f"checkpoint {path} has unexpected tensor {extra[0]!r} for config {cfg}")


def load_hf_checkpoint(path: str | Path, dtype: Any = jnp.float32) -> tuple[ModelConfig, dict]:
    """(ModelConfig, params) from a HF checkpoint directory (config.json + safetensors).

    Raises ValueError naming the first missing, unexpected or mis-shaped tensor.
    """
    path = Path(path)
    files = tensor_files(path)
    cfg = config_from_hf(read_hf_config(path), has_lm_head="lm_head.weight" in files)
    wanted = expected_tensors(cfg)
    check_names(files, [name for name, _, _ in wanted], cfg, path, "lm_head.weight")
    params: dict[str, Any] = {}
    for name, param_path, shape in wanted:
        hf_shape = shape[::-1] if is_linear_weight(name) else shape
        got = tensor_shape(files[name], name)
        if got != hf_shape:
            raise ValueError(f"tensor {name!r} in {path} has shape {got}, expected {hf_shape}")
        array = np.asarray(read_tensor(files[name], name), dtype=np.float32)
        array = array.T if is_linear_weight(name) else array
        insert_param(params, param_path, jnp.asarray(array, dtype=dtype))
    return cfg, params


def insert_param(params: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    """Sets params[path[0]][path[1]]...[path[-1]] = value, creating nested dicts."""
    node = params
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value


def load_hf_tokenizer(path: str | Path) -> tokenizers.Tokenizer:
    """The `tokenizers.Tokenizer` from a checkpoint directory's tokenizer.json."""
    file = Path(path) / "tokenizer.json"
    if not file.exists():
        raise FileNotFoundError(f"no tokenizer.json in {path}")
    return tokenizers.Tokenizer.from_file(str(file))
