"""Tasks (tfds array_record builders), verifiers, tokenizers and the task registry."""

from calclip_jax.data.builder import ExampleSource, TaskBuilder, builder_for, load_split
from calclip_jax.data.example import Example
from calclip_jax.data.gguf_tokenizer import GGUFTokenizer
from calclip_jax.data.hf_tokenizer import HFTokenizer
from calclip_jax.data.registry import get_task, list_tasks, register_task
from calclip_jax.data.sft import SFTBatch, encode_sft_batch
from calclip_jax.data.task import SPLITS, Task, verifier_knob
from calclip_jax.data.tokenizer import CharTokenizer, Tokenizer
from calclip_jax.data.verify import VerifyResult

__all__ = [
    "SPLITS",
    "CharTokenizer",
    "Example",
    "ExampleSource",
    "GGUFTokenizer",
    "HFTokenizer",
    "SFTBatch",
    "Task",
    "TaskBuilder",
    "Tokenizer",
    "VerifyResult",
    "builder_for",
    "encode_sft_batch",
    "get_task",
    "list_tasks",
    "load_split",
    "register_task",
    "verifier_knob",
]
