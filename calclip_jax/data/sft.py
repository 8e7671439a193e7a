"""SFT batches from demonstrations: [bos] prompt answer eos, loss on the answer and eos."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from calclip_jax.data.tokenizer import Tokenizer


@dataclasses.dataclass(frozen=True)
class SFTBatch:
    """tokens_BT int32; attn_mask_BT int32 (1 on real tokens); loss_mask_BT int32 (1 on the answer
    tokens and the EOS, i.e. the tokens to predict)."""

    tokens_BT: np.ndarray
    attn_mask_BT: np.ndarray
    loss_mask_BT: np.ndarray


def encode_sft_batch(
    tokenizer: Tokenizer,
    prompts: Sequence[str],
    answers: Sequence[str],
    *,
    max_len: int | None = None,
    left_pad: bool = False,
) -> SFTBatch:
    """Encodes prompt/answer pairs (right-padded by default). Raises if longer than max_len."""
    if len(prompts) != len(answers):
        raise ValueError("prompts and answers must have the same length")
    full = [p + a for p, a in zip(prompts, answers, strict=True)]
    tokens_BT, attn_mask_BT = tokenizer.batch_encode(
        full, max_len=max_len, add_bos=True, add_eos=True, left_pad=left_pad
    )
    loss_mask_BT = np.zeros_like(attn_mask_BT)
    bos = int(tokenizer.bos_id is not None)
    for i, (prompt, text) in enumerate(zip(prompts, full, strict=True)):
        # Count the answer's tokens in the joint encoding (robust to merges across the boundary).
        n_target = len(tokenizer.encode(text)) - len(tokenizer.encode(prompt)) + 1  # + eos
        seq_len = int(attn_mask_BT[i].sum())
        end = tokens_BT.shape[1] if left_pad else seq_len
        loss_mask_BT[i, end - n_target : end] = 1
        assert n_target <= seq_len - bos
    return SFTBatch(tokens_BT, attn_mask_BT, loss_mask_BT)
