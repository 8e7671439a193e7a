"""Llama/Qwen-family decoder with a precision recipe, KV cache, log-probs, HF and GGUF import."""

from calclip_jax.model.checkpoints import load_checkpoint, resolve_checkpoint
from calclip_jax.model.chunked_logprobs import chunked_token_logprobs_and_entropy, chunks_lm_head
from calclip_jax.model.config import ModelConfig
from calclip_jax.model.forward import forward_logits, positions_from_mask
from calclip_jax.model.gguf_import import load_gguf_checkpoint
from calclip_jax.model.hf_import import load_hf_checkpoint, load_hf_tokenizer
from calclip_jax.model.kv_cache import init_cache
from calclip_jax.model.lm_head import HeadDot, lm_head_dot, lm_head_weight
from calclip_jax.model.logprobs import token_logprobs_and_entropy
from calclip_jax.model.sharding import param_shardings, param_specs
from calclip_jax.model.transformer import Transformer

__all__ = [
    "HeadDot",
    "ModelConfig",
    "Transformer",
    "chunked_token_logprobs_and_entropy",
    "chunks_lm_head",
    "forward_logits",
    "init_cache",
    "lm_head_dot",
    "lm_head_weight",
    "load_checkpoint",
    "load_gguf_checkpoint",
    "load_hf_checkpoint",
    "load_hf_tokenizer",
    "param_shardings",
    "param_specs",
    "positions_from_mask",
    "resolve_checkpoint",
    "token_logprobs_and_entropy",
]
