"""A thin wrapper around a HF `tokenizer.json` (the `tokenizers` package) with the Tokenizer API."""

from __future__ import annotations

import os
from collections.abc import Iterable

import tokenizers

from calclip_jax.data.tokenizer import Tokenizer

_EOS_CANDIDATES = ("<|endoftext|>", "<|end_of_text|>", "<|im_end|>", "</s>", "<eos>", "[SEP]")
_BOS_CANDIDATES = ("<|begin_of_text|>", "<s>", "<bos>", "[CLS]")


class HFTokenizer(Tokenizer):
    """Wraps `tokenizers.Tokenizer`. Special tokens are given by their text; if `eos_token` or
    `bos_token` is None, common names are looked up (no BOS is fine); no `pad_token`: pad with EOS.
    """

    def __init__(
        self,
        tokenizer: tokenizers.Tokenizer,
        *,
        eos_token: str | None = None,
        bos_token: str | None = None,
        pad_token: str | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        eos = self._find(eos_token, _EOS_CANDIDATES)
        if eos is None:
            raise ValueError("no EOS token found; pass eos_token=")
        self.eos_id = eos
        self.bos_id = self._find(bos_token, _BOS_CANDIDATES)
        pad = self._find(pad_token, ()) if pad_token is not None else None
        self.pad_id = self.eos_id if pad is None else pad

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **special_tokens: str | None) -> HFTokenizer:
        """Loads `tokenizer.json` from `path`."""
        return cls(tokenizers.Tokenizer.from_file(os.fspath(path)), **special_tokens)

    def _find(self, token: str | None, candidates: tuple[str, ...]) -> int | None:
        if token is not None:
            token_id = self.tokenizer.token_to_id(token)
            if token_id is None:
                raise ValueError(f"token {token!r} is not in the vocabulary")
            return token_id
        for candidate in candidates:
            token_id = self.tokenizer.token_to_id(candidate)
            if token_id is not None:
                return token_id
        return None

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Iterable[int]) -> str:
        special = {self.eos_id, self.pad_id, self.bos_id}
        return self.tokenizer.decode([int(i) for i in ids if int(i) not in special])
