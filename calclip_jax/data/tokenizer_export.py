"""A checkpoint's tokenizer as Hugging Face tokenizer files (tokenizer.json,
tokenizer_config.json with the chat template), for an exported model directory.

A GGUF's tokenizer is built as `gguf_tokenizer` builds it (as transformers does) and saved with a
`tokenizer_config.json` naming its special tokens and chat template, so
`AutoTokenizer.from_pretrained(dir)` gives the ids and chat text of `GGUFTokenizer`. An HF
directory's tokenizer files are copied as they are.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tokenizers import processors

from calclip_jax.data.gguf_tokenizer import (
    GGUFTokenizer,
    build_gguf_tokenizer,
    read_gguf_tokenizer_metadata,
)
from calclip_jax.data.hf_tokenizer import HFTokenizer

TOKENIZER_JSON = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
# What transformers reads for a tokenizer (and generation defaults) from a model directory.
HF_TOKENIZER_FILES = (
    TOKENIZER_JSON,
    TOKENIZER_CONFIG,
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
    "vocab.json",
    "merges.txt",
    "generation_config.json",
)


def save_gguf_tokenizer(metadata: Mapping[str, Any], out: str | Path) -> list[Path]:
    """Writes the tokenizer of GGUF `metadata` (`read_gguf_tokenizer_metadata`) into `out`.

    When the file asks for a BOS token (`tokenizer.ggml.add_bos_token`), tokenizer.json gets a
    post-processor that prepends it, as the GGUF's users expect of encoding.
    """
    out = Path(out)
    tokenizer = build_gguf_tokenizer(metadata)
    ours = GGUFTokenizer(tokenizer, metadata)
    bos = ours.special_tokens.get("bos_token")
    if ours.add_bos_token and bos is not None:
        bos_pair = [(bos, ours.bos_token_id)]
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=bos_pair
        )
    config: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **ours.special_tokens,
        "add_bos_token": ours.add_bos_token,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
    }
    if ours.chat_template is not None:
        config["chat_template"] = ours.chat_template
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out / TOKENIZER_JSON))
    (out / TOKENIZER_CONFIG).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return [out / TOKENIZER_JSON, out / TOKENIZER_CONFIG]


def copy_hf_tokenizer(source: str | Path, out: str | Path) -> list[Path]:
    """Copies `HF_TOKENIZER_FILES` present in checkpoint directory `source` into `out`; writes a
    tokenizer_config.json naming the special tokens `HFTokenizer` finds when there is none."""
    source, out = Path(source), Path(out)
    if not (source / TOKENIZER_JSON).is_file():
        raise FileNotFoundError(f"no {TOKENIZER_JSON} in {source}")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in HF_TOKENIZER_FILES:
        if (source / name).is_file():
            written.append(Path(shutil.copyfile(source / name, out / name)))
    if not (out / TOKENIZER_CONFIG).exists():
        ours = HFTokenizer.from_file(source / TOKENIZER_JSON)
        token = ours.tokenizer.id_to_token
        config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": token(ours.eos_id)}
        if ours.bos_id is not None:
            config["bos_token"] = token(ours.bos_id)
        (out / TOKENIZER_CONFIG).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        written.append(out / TOKENIZER_CONFIG)
    return written


def save_checkpoint_tokenizer(checkpoint: str | Path, out: str | Path) -> list[Path]:
    """The tokenizer files of a resolved checkpoint (a .gguf file or an HF directory) in `out`."""
    path = Path(checkpoint)
    if path.is_file():
        return save_gguf_tokenizer(read_gguf_tokenizer_metadata(path), out)
    return copy_hf_tokenizer(path, out)
