"""The tokenizer a GGUF file describes (byte-level BPE), built as transformers builds it.

A GGUF has no `tokenizer.json`: the vocabulary, merges, token types, special token ids and chat
template are metadata under llama.cpp's key names (`tokenizer.ggml.*`, `tokenizer.chat_template`).
`build_gguf_tokenizer` turns them into a `tokenizers.Tokenizer` the way transformers'
`integrations/gguf/gguf_tokenizer_mapping.py` does (`byte_level_tokenizer`,
`add_gguf_special_tokens`, `set_split_regex`), so ids match
`AutoTokenizer.from_pretrained(dir, gguf_file=name)`. Needs the `gguf` package (the `llm` extra).

    tok = GGUFTokenizer.from_gguf("smollm2-135m-instruct")
    ids = tok.encode_chat([{"role": "user", "content": "12+7="}])
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import tokenizers
from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers

from calclip_jax.data.chat_template import render_chat_template
from calclip_jax.data.hf_tokenizer import HFTokenizer
from calclip_jax.gguf_file import open_gguf
from calclip_jax.shipped import SHIPPED, shipped_file

# Built-in name -> (distribution that ships the file, file name inside it).

# llama.cpp token types (tokenizer.ggml.token_type).
_CONTROL = 3
_USER_DEFINED = 4

# Names llama.cpp also treats as end of generation when they are in the vocabulary (besides EOS and
# the EOT / EOM ids the file may give): a chat turn ends with one of them.
_END_OF_TURN_TOKENS = (
    "<|im_end|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
)

# Split regexes by `tokenizer.ggml.pre`, copied from transformers' GGUF_PRE_TOKENIZER_SPLITS (any
# other value keeps GPT-2's ByteLevel regex, as there). We follow transformers, which is not what
# llama.cpp does for "smollm": it isolates each digit first (a `\p{N}` split), so ids differ on a
# run of 2+ whitespace characters before a digit ("x   5", "\n\n1"; about 3% of random
# arithmetic-like strings), not on "12+7=19" or chat text with single newlines.
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_TEKKEN_SPLIT = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_GPT4O_SPLIT = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN35_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
    r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
GGUF_PRE_TOKENIZER_SPLITS: dict[str, str] = {
    **dict.fromkeys(
        (
            "llama3",
            "llama-v3",
            "llama-bpe",
            "falcon3",
            "falcon-h1",
            "pixtral",
            "midm-2.0",
            "lfm2",
            "jina-v5-nano",
            "dbrx",
            "smaug-bpe",
        ),
        _LLAMA3_SPLIT,
    ),
    "tekken": _TEKKEN_SPLIT,
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez"), _QWEN2_SPLIT),
    "qwen35": _QWEN35_SPLIT,
    **dict.fromkeys(("gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"), _GPT4O_SPLIT),
}


def resolve_gguf(path_or_name: str | os.PathLike[str]) -> Path:
    """A GGUF path as given, or the shipped file for a built-in name."""
    if isinstance(path_or_name, str) and path_or_name in SHIPPED:
        return shipped_file(path_or_name)
    path = Path(path_or_name)
    if not path.is_file():
        raise FileNotFoundError(f"no GGUF file at {path} (built-in names: {sorted(SHIPPED)})")
    return path


def read_gguf_tokenizer_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The `tokenizer.*` metadata of a GGUF file, as Python values (lists for arrays)."""
    reader = open_gguf(path)
    return {
        key: field.contents()
        for key, field in reader.fields.items()
        if key.startswith("tokenizer.")
    }


@functools.cache
def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map (transformers' `bytes_to_unicode`)."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    chars = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {byte: chr(char) for byte, char in zip(printable, chars, strict=True)}


def build_gguf_tokenizer(metadata: Mapping[str, Any]) -> tokenizers.Tokenizer:
    """A byte-level BPE `tokenizers.Tokenizer` from GGUF `tokenizer.*` metadata.

    Vocabulary (tokens spelled outside the byte alphabet are respelled from their UTF-8 bytes) and
    merges; GPT-2's ByteLevel pre-tokenizer, or a Split regex + ByteLevel for the
    `tokenizer.ggml.pre` values transformers knows; control tokens (type 3) added as special tokens,
    user-defined ones (type 4) as plain added tokens.
    """
    kind = metadata.get("tokenizer.ggml.model")
    if kind != "gpt2":
        raise ValueError(
            f"only byte-level BPE GGUF tokenizers (model 'gpt2') are built, not {kind!r}"
        )
    tokens: list[str] = list(metadata["tokenizer.ggml.tokens"])
    if "tokenizer.ggml.merges" not in metadata:
        raise ValueError("the GGUF has no tokenizer.ggml.merges")
    spelling = _bytes_to_unicode()
    alphabet = set(spelling.values())

    def spelled(token: str) -> str:
        return token if set(token) <= alphabet else "".join(spelling[b] for b in token.encode())

    vocab = {spelled(token): index for index, token in enumerate(tokens)}
    merges = [tuple(merge.split(" ")) for merge in metadata["tokenizer.ggml.merges"]]
    tok = tokenizers.Tokenizer(
        models.BPE(
            vocab=vocab,
            merges=merges,
            dropout=None,
            continuing_subword_prefix="",
            end_of_word_suffix="",
            fuse_unk=False,
        )
    )
    split = GGUF_PRE_TOKENIZER_SPLITS.get(metadata.get("tokenizer.ggml.pre", ""))
    if split is None:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(split), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    tok.decoder = decoders.ByteLevel()

    types = list(metadata.get("tokenizer.ggml.token_type") or [1] * len(tokens))
    # A control token spelled outside the byte alphabet is a llama.cpp mislabel (transformers skips
    # it: adding it would grow the vocabulary past the model's).
    control = [
        t for t, k in zip(tokens, types, strict=True) if k == _CONTROL and set(t) <= alphabet
    ]
    if control:
        tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in control])
    user = [t for t, k in zip(tokens, types, strict=True) if k == _USER_DEFINED and t in vocab]
    if user:
        tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in user])
    return tok


class GGUFTokenizer(HFTokenizer):
    """`HFTokenizer` for a GGUF's tokenizer, with its chat template and stop ids.

    `bos_token_id` / `eos_token_id` / `pad_token_id` are the file's ids. `bos_id` (what
    `batch_encode(add_bos=True)` prepends) is the BOS only when `tokenizer.ggml.add_bos_token` says
    so (SmolLM2: no). `stop_ids`: EOS, the file's EOT / EOM ids and the end-of-turn tokens llama.cpp
    stops on (`<|im_end|>`, `<|endoftext|>`, ...) that are special tokens here.
    """

    def __init__(self, tokenizer: tokenizers.Tokenizer, metadata: Mapping[str, Any]) -> None:
        tokens = metadata["tokenizer.ggml.tokens"]

        def token_at(key: str) -> str | None:
            index = metadata.get(f"tokenizer.ggml.{key}")
            return None if index is None else tokens[int(index)]

        if token_at("eos_token_id") is None:
            raise ValueError("the GGUF has no tokenizer.ggml.eos_token_id")
        super().__init__(
            tokenizer,
            eos_token=token_at("eos_token_id"),
            bos_token=token_at("bos_token_id"),
            pad_token=token_at("padding_token_id"),
        )
        self.bos_token_id = self.bos_id
        self.eos_token_id = self.eos_id
        self.pad_token_id = self.pad_id
        self.add_bos_token = bool(metadata.get("tokenizer.ggml.add_bos_token", False))
        if token_at("bos_token_id") is None:  # not one HFTokenizer guessed by name
            self.bos_token_id = self.bos_id = None
        if not self.add_bos_token:
            self.bos_id = None
        self.special_tokens: dict[str, str] = {
            name: text
            for name, key in (
                ("bos_token", "bos_token_id"),
                ("eos_token", "eos_token_id"),
                ("unk_token", "unknown_token_id"),
                ("pad_token", "padding_token_id"),
            )
            if (text := token_at(key)) is not None
        }
        self.chat_template: str | None = metadata.get("tokenizer.chat_template")
        special = {t.content for t in tokenizer.get_added_tokens_decoder().values() if t.special}
        stop = [self.eos_id]
        stop += [
            int(metadata[k])
            for k in ("tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id")
            if k in metadata
        ]
        stop += [tokenizer.token_to_id(t) for t in _END_OF_TURN_TOKENS if t in special]
        self.stop_ids: tuple[int, ...] = tuple(dict.fromkeys(stop))

    @classmethod
    def from_gguf(cls, path_or_name: str | os.PathLike[str]) -> GGUFTokenizer:
        """From a GGUF path or a built-in name ("smollm2-135m-instruct")."""
        metadata = read_gguf_tokenizer_metadata(resolve_gguf(path_or_name))
        return cls(build_gguf_tokenizer(metadata), metadata)

    def decode_response(self, ids: Iterable[int]) -> tuple[str, bool]:
        """Text up to the first stop id and whether one was found (the response finished)."""
        kept: list[int] = []
        for token in ids:
            if int(token) in self.stop_ids:
                return self.decode(kept), True
            kept.append(int(token))
        return self.decode(kept), False

    def format_prompt(self, text: str, system: str = "") -> str:
        """A task prompt as one user turn of the chat template (after a system turn when `system`
        is given), ready for the answer; without a template, as `Tokenizer.format_prompt`."""
        if self.chat_template is None:
            return super().format_prompt(text, system)
        turns = [{"role": "system", "content": system}] if system else []
        return self.apply_chat_template([*turns, {"role": "user", "content": text}])

    def apply_chat_template(
        self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True
    ) -> str:
        """The chat text of `messages`, as transformers' `apply_chat_template(tokenize=False)`."""
        if self.chat_template is None:
            raise ValueError("the GGUF has no tokenizer.chat_template")
        return render_chat_template(
            self.chat_template,
            messages,
            add_generation_prompt=add_generation_prompt,
            **self.special_tokens,
        )

    def encode_chat(
        self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True
    ) -> list[int]:
        """Token ids of the chat text (special tokens in it become their ids)."""
        return self.encode(
            self.apply_chat_template(messages, add_generation_prompt=add_generation_prompt)
        )
