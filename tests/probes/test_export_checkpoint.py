"""export_run on a run that started from an HF directory: the export holds the checkpoint's
parameters bit for bit, keeps the source config.json's other keys and copies its tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import tokenizers
from run_fixtures import make_run

from calclip_jax.config import base_config
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model import ModelConfig, load_hf_checkpoint
from calclip_jax.model.hf_export import save_hf_checkpoint
from calclip_jax.probes.export_checkpoint import export_run
from calclip_jax.train.state import init_variables
from calclip_jax.workdir.checkpoints import Checkpointer

CFG = ModelConfig(
    vocab_size=8, d_model=16, n_layers=1, n_heads=2, n_kv_heads=1, head_dim=8, d_ff=32,
    tie_embeddings=False, qk_norm=True,
)  # fmt: skip


def init_params(cfg: ModelConfig, seed: int = 0) -> dict:
    return init_variables(cfg, PrecisionRecipe.preset("fp32"), jax.random.key(seed))[0]


def _hf_dir(path: Path) -> Path:
    """A Qwen3-style HF checkpoint directory with a word-level tokenizer of CFG's vocabulary."""
    save_hf_checkpoint(path, CFG, init_params(CFG), base_config={"bos_token_id": 5, "foo": "bar"})
    words = ["[UNK]", "<|endoftext|>", *"0123+="]
    tok = tokenizers.Tokenizer(
        tokenizers.models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]")
    )
    tok.save(str(path / "tokenizer.json"))
    return path


def test_export_of_a_run_from_an_hf_directory(tmp_path):
    source = _hf_dir(tmp_path / "source")
    config = base_config()
    config.model.checkpoint, config.sft.cache_dir = str(source), str(tmp_path / "cache")
    workdir = make_run(tmp_path / "run", [{"step": 3}], config=json.loads(config.to_json()))
    trained = jax.tree.map(lambda x: x + 0.5, init_params(CFG, seed=1))
    checkpointer = Checkpointer(str(workdir))
    checkpointer.save(3, {"params": trained})
    checkpointer.close()

    record = export_run(workdir, tmp_path / "hf")
    assert record["step"] == 3 and record["checkpoint"] == str(source)
    cfg, params = load_hf_checkpoint(tmp_path / "hf")
    assert cfg == CFG
    jax.tree.map(np.testing.assert_array_equal, params, trained)
    exported = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert (exported["model_type"], exported["bos_token_id"]) == ("qwen3", 5)
    assert exported["foo"] == "bar"
    copied = (tmp_path / "hf" / "tokenizer.json").read_text()
    assert copied == (source / "tokenizer.json").read_text()
    tokenizer_config = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
    assert tokenizer_config["eos_token"] == "<|endoftext|>"
