"""Tokenizer export: transformers loads the exported GGUF tokenizer (local files only) with our
ids, chat text and special tokens; an HF directory's tokenizer files are copied."""

from __future__ import annotations

import json

import pytest
import tokenizers
from gguf_parse_once import one_parse_per_file
from shipped_model import shipped_gguf

from calclip_jax.data.gguf_tokenizer import (
    GGUFTokenizer,
    build_gguf_tokenizer,
    read_gguf_tokenizer_metadata,
)
from calclip_jax.data.tokenizer_export import (
    copy_hf_tokenizer,
    save_checkpoint_tokenizer,
    save_gguf_tokenizer,
)

TEXTS = ["", "12+7=19", "x   5\n\n1", "café 🙂 <|im_end|> tail", "Compute 46 + 22.\nReply."]
CHAT = [
    {"role": "system", "content": "You are a calculator."},
    {"role": "user", "content": "Compute 46 + 22. Reply with only the result, no words."},
]


@pytest.fixture(scope="module")
def metadata():
    path = shipped_gguf()
    with one_parse_per_file():
        return read_gguf_tokenizer_metadata(path)


def _auto_tokenizer(path):
    transformers = pytest.importorskip("transformers", reason="transformers is the oracle")
    return transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)


def test_gguf_tokenizer_files_hold_our_tokenizer(tmp_path, metadata):
    ours = GGUFTokenizer(build_gguf_tokenizer(metadata), metadata)
    names = {p.name for p in save_gguf_tokenizer(metadata, tmp_path)}
    assert names == {"tokenizer.json", "tokenizer_config.json"}
    saved = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    for text in TEXTS:
        assert saved.encode(text, add_special_tokens=False).ids == ours.encode(text)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config["chat_template"] == metadata["tokenizer.chat_template"]
    assert (config["eos_token"], config["bos_token"]) == ("<|im_end|>", "<|im_start|>")
    assert config["add_bos_token"] is False


def test_transformers_loads_the_gguf_tokenizer_and_chat_template(tmp_path, metadata):
    ours = GGUFTokenizer(build_gguf_tokenizer(metadata), metadata)
    save_gguf_tokenizer(metadata, tmp_path)
    theirs = _auto_tokenizer(tmp_path)
    for text in TEXTS:
        assert theirs(text)["input_ids"] == ours.encode(text), text
    chat = theirs.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    assert chat == ours.apply_chat_template(CHAT)
    ids = theirs.apply_chat_template(CHAT, tokenize=True, add_generation_prompt=True)
    ids = ids["input_ids"] if hasattr(ids, "keys") else ids
    assert ids == ours.encode_chat(CHAT)
    assert (theirs.eos_token_id, theirs.bos_token_id, theirs.pad_token_id) == (2, 1, 2)
    assert theirs.decode(ours.encode("12+7=19")) == "12+7=19"


def test_a_gguf_asking_for_bos_gets_it_prepended(tmp_path, metadata):
    with_bos = {**metadata, "tokenizer.ggml.add_bos_token": True}
    save_gguf_tokenizer(with_bos, tmp_path)
    saved = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert saved.encode("12+7").ids == [1, *saved.encode("12+7", add_special_tokens=False).ids]
    assert _auto_tokenizer(tmp_path)("12+7")["input_ids"][0] == 1


def test_hf_directory_tokenizer_is_copied(tmp_path):
    vocab = {"[UNK]": 0, "<|endoftext|>": 1, "hello": 2, "world": 3}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    src = tmp_path / "src"
    src.mkdir()
    tok.save(str(src / "tokenizer.json"))
    (src / "generation_config.json").write_text('{"eos_token_id": 1}')
    (src / "model.safetensors").write_bytes(b"not a tokenizer file")
    names = {p.name for p in save_checkpoint_tokenizer(src, tmp_path / "out")}
    assert names == {"tokenizer.json", "generation_config.json", "tokenizer_config.json"}
    assert not (tmp_path / "out" / "model.safetensors").exists()
    config = json.loads((tmp_path / "out" / "tokenizer_config.json").read_text())
    assert config["eos_token"] == "<|endoftext|>" and "bos_token" not in config
    (src / "tokenizer_config.json").write_text('{"eos_token": "world"}')
    copy_hf_tokenizer(src, tmp_path / "again")
    assert json.loads((tmp_path / "again" / "tokenizer_config.json").read_text()) == {
        "eos_token": "world"
    }
    with pytest.raises(FileNotFoundError, match=r"tokenizer\.json"):
        copy_hf_tokenizer(tmp_path / "out" / "nope", tmp_path / "x")
    theirs = _auto_tokenizer(tmp_path / "out")
    assert theirs("hello world")["input_ids"] == [2, 3] and theirs.eos_token_id == 1
