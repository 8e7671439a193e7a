"""Char tokenizer, HF tokenizer.json wrapper (built here, no network), SFT batches."""

import numpy as np
import pytest
import tokenizers
from hypothesis import given
from hypothesis import strategies as st

from calclip_jax.data import CharTokenizer, HFTokenizer, encode_sft_batch, get_task

TASKS = (
    get_task("arithmetic", operators="+-*", num_train=0, num_test=10),
    get_task("countdown", num_train=0, num_test=100),
)
CHAR = CharTokenizer.for_tasks(*TASKS)


def test_char_vocab_covers_tasks_and_specials():
    assert (CHAR.pad_id, CHAR.bos_id, CHAR.eos_id) == (0, 1, 2)
    assert set(CHAR.alphabet) == set("0123456789+-*/()=,:")
    assert CHAR.vocab_size == 3 + len(CHAR.alphabet)
    assert CharTokenizer.for_tasks(*TASKS[::-1]).alphabet == CHAR.alphabet
    with pytest.raises(ValueError, match="not in the alphabet"):
        CHAR.encode("1 + 2")
    with pytest.raises(ValueError, match="unique"):
        CharTokenizer("aa")


@given(st.text(alphabet=CHAR.alphabet, max_size=40))
def test_char_round_trip(text):
    ids = CHAR.encode(text)
    assert len(ids) == len(text) and min(ids, default=3) >= 3
    assert CHAR.decode(ids) == text
    assert CHAR.decode([CHAR.bos_id, *ids, CHAR.eos_id, CHAR.pad_id]) == text


def test_decode_response_stops_at_eos():
    ids = CHAR.encode("357")
    assert CHAR.decode_response([*ids, CHAR.eos_id, *CHAR.encode("99"), 0]) == ("357", True)
    assert CHAR.decode_response(ids) == ("357", False)
    assert CHAR.decode_response(np.array([CHAR.eos_id])) == ("", True)


def test_batch_encode_left_and_right_padding():
    tokens_BT, mask_BT = CHAR.batch_encode(["1+2=", "10+20="])
    assert tokens_BT.shape == mask_BT.shape == (2, 7) and tokens_BT.dtype == np.int32
    assert mask_BT.tolist() == [[0, 0, 1, 1, 1, 1, 1], [1] * 7]
    assert tokens_BT[0, :2].tolist() == [0, 0] and tokens_BT[0, 2] == CHAR.bos_id
    assert CHAR.decode(tokens_BT[0]) == "1+2="
    right_BT, rmask_BT = CHAR.batch_encode(["1=", "12="], max_len=5, add_eos=True, left_pad=False)
    assert rmask_BT.tolist() == [[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]
    assert right_BT[0].tolist() == [1, *CHAR.encode("1="), 2, 0]
    with pytest.raises(ValueError, match="max_len"):
        CHAR.batch_encode(["12345"], max_len=3)


def test_sft_batch_masks_answer_and_eos():
    batch = encode_sft_batch(CHAR, ["1+2=", "10+20="], ["3", "30"])
    assert batch.tokens_BT.shape == (2, 10)
    assert batch.attn_mask_BT[0].tolist() == [1] * 7 + [0] * 3
    assert batch.loss_mask_BT[0].tolist() == [0] * 5 + [1, 1] + [0] * 3
    assert batch.loss_mask_BT[1].tolist() == [0] * 7 + [1] * 3
    masked = batch.tokens_BT[1][batch.loss_mask_BT[1] == 1].tolist()
    assert masked == [*CHAR.encode("30"), CHAR.eos_id]
    left = encode_sft_batch(CHAR, ["1+2=", "10+20="], ["3", "30"], left_pad=True)
    assert left.loss_mask_BT[0].tolist() == [0] * 8 + [1, 1]


@pytest.fixture(scope="module")
def hf_path(tmp_path_factory):
    """A byte-level BPE tokenizer.json trained here on task text."""
    tok = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token=None))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<pad>", "<s>", "</s>"],
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
    )
    corpus = [TASKS[1].demonstration(e) for e in TASKS[1].examples("test")] + ["hello world"]
    tok.train_from_iterator(corpus, trainer=trainer)
    path = tmp_path_factory.mktemp("hf") / "tokenizer.json"
    tok.save(str(path))
    return path


def test_hf_tokenizer_special_ids_and_round_trip(hf_path):
    tok = HFTokenizer.from_file(hf_path)
    assert (tok.pad_id, tok.bos_id, tok.eos_id) == (tok.eos_id, 1, 2)  # no pad_token: pad = eos
    assert HFTokenizer.from_file(hf_path, pad_token="<pad>").pad_id == 0
    assert tok.vocab_size <= 300
    for text in ["3,7,25:100=(7-3)*25", "hello world", "12+345=357"]:
        assert tok.decode(tok.encode(text)) == text
    ids = tok.encode("(7-3)*25")
    assert tok.decode_response([*ids, tok.eos_id, *tok.encode("99")]) == ("(7-3)*25", True)
    with pytest.raises(ValueError, match="not in the vocabulary"):
        HFTokenizer.from_file(hf_path, eos_token="<|nope|>")


def test_hf_batch_and_sft_share_the_interface(hf_path):
    tok = HFTokenizer.from_file(hf_path, pad_token="<pad>")
    tokens_BT, mask_BT = tok.batch_encode(["3,7,25:100=", "1,2:3="])
    assert (tokens_BT[mask_BT == 0] == 0).all() and (mask_BT[:, -1] == 1).all()
    assert tok.decode(tokens_BT[1][mask_BT[1] == 1]) == "1,2:3="
    batch = encode_sft_batch(tok, ["3,7,25:100="], ["(7-3)*25"])
    target = batch.tokens_BT[0][batch.loss_mask_BT[0] == 1].tolist()
    assert target[-1] == tok.eos_id
    real = batch.tokens_BT[0][batch.attn_mask_BT[0] == 1].tolist()
    context = real[1 : len(real) - len(target)]  # after BOS, before the answer
    assert tok.decode(context) + tok.decode(target[:-1]) == "3,7,25:100=(7-3)*25"
