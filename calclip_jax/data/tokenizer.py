"""Tokenizer interface and the character-level tokenizer for the toy tasks."""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence

import numpy as np

from calclip_jax.data.task import Task


class Tokenizer(abc.ABC):
    """Shared interface: encode/decode text, EOS-aware response decoding, padded batches."""

    pad_id: int
    bos_id: int | None
    eos_id: int

    @property
    @abc.abstractmethod
    def vocab_size(self) -> int:
        """Number of token ids (ids are 0..vocab_size-1)."""

    @abc.abstractmethod
    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, without special tokens."""

    @abc.abstractmethod
    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids`, dropping special tokens (pad, bos, eos)."""

    def format_prompt(self, text: str, system: str = "") -> str:
        """The text a task prompt is encoded as: itself, after the system message and a blank line
        when there is one (chat tokenizers use their template)."""
        return f"{system}\n\n{text}" if system else text

    def decode_response(self, ids: Iterable[int]) -> tuple[str, bool]:
        """Text up to the first EOS and whether an EOS was found (the response finished)."""
        kept: list[int] = []
        for token in ids:
            if int(token) == self.eos_id:
                return self.decode(kept), True
            kept.append(int(token))
        return self.decode(kept), False

    def batch_encode(
        self,
        texts: Sequence[str],
        *,
        max_len: int | None = None,
        add_bos: bool = True,
        add_eos: bool = False,
        left_pad: bool = True,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Encodes and pads `texts` -> (tokens_BT int32, mask_BT int32, 1 on real tokens).

        Prompts are left-padded by default. T = max_len or the longest sequence; a sequence
        longer than max_len raises ValueError (never truncated silently).
        """
        rows = []
        for text in texts:
            ids = self.encode(text)
            if add_bos and self.bos_id is not None:
                ids = [self.bos_id, *ids]
            rows.append([*ids, self.eos_id] if add_eos else ids)
        longest = max((len(r) for r in rows), default=0)
        length = longest if max_len is None else max_len
        if longest > length:
            raise ValueError(f"a sequence has {longest} tokens > max_len={max_len}")
        tokens_BT = np.full((len(rows), length), self.pad_id, np.int32)
        mask_BT = np.zeros((len(rows), length), np.int32)
        for i, ids in enumerate(rows):
            cols = slice(length - len(ids), length) if left_pad else slice(0, len(ids))
            tokens_BT[i, cols] = ids
            mask_BT[i, cols] = 1
        return tokens_BT, mask_BT


class CharTokenizer(Tokenizer):
    """One token per character: ids 0 pad, 1 bos, 2 eos, then the alphabet in the given order."""

    pad_id = 0
    bos_id = 1
    eos_id = 2
    _NUM_SPECIAL = 3

    def __init__(self, alphabet: str) -> None:
        if len(set(alphabet)) != len(alphabet) or not alphabet:
            raise ValueError(f"alphabet must be non-empty with unique characters: {alphabet!r}")
        self.alphabet = alphabet
        self._ids = {char: i + self._NUM_SPECIAL for i, char in enumerate(alphabet)}

    @classmethod
    def for_tasks(cls, *tasks: Task) -> CharTokenizer:
        """A tokenizer covering the tasks' alphabets (sorted, so it is stable across task order)."""
        return cls("".join(sorted({char for task in tasks for char in task.alphabet})))

    @property
    def vocab_size(self) -> int:
        return len(self.alphabet) + self._NUM_SPECIAL

    def encode(self, text: str) -> list[int]:
        try:
            return [self._ids[char] for char in text]
        except KeyError as err:
            raise ValueError(f"character {err.args[0]!r} is not in the alphabet") from None

    def decode(self, ids: Iterable[int]) -> str:
        chars = []
        for token in ids:
            token = int(token)
            if not 0 <= token < self.vocab_size:
                raise ValueError(f"token id {token} outside [0, {self.vocab_size})")
            if token >= self._NUM_SPECIAL:
                chars.append(self.alphabet[token - self._NUM_SPECIAL])
        return "".join(chars)
