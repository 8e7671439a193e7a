"""Llama/Qwen-family decoder with a precision recipe, KV cache, log-probs and HF import."""

from calclip_jax.model.chunked_logprobs import chunked_token_logprobs_and_entropy, chunks_lm_head
from calclip_jax.model.config import ModelConfig
from calclip_jax.model.forward import forward_logits, positions_from_mask
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
    "load_hf_checkpoint",
    "load_hf_tokenizer",
    "param_shardings",
    "param_specs",
    "positions_from_mask",
    "token_logprobs_and_entropy",
]
