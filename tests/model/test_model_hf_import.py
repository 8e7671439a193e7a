"""HF Llama / Qwen2 / Qwen3 import: logits match transformers in float32; bad files fail clearly."""

from __future__ import annotations

import copy
import json
import shutil

import jax.numpy as jnp
import numpy as np
import pytest

from calclip_jax.model import forward_logits, load_hf_checkpoint, load_hf_tokenizer

torch = pytest.importorskip("torch", reason="torch not installed (CI installs it on Python 3.11)")
transformers = pytest.importorskip("transformers", reason="transformers not installed")

SIZES = dict(
    vocab_size=64,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=48,
    max_position_embeddings=64,
)


def _hf_model(family: str, **extra):
    cls_cfg, cls_model = {
        "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
        "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
        "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM),
    }[family]
    torch.manual_seed(0)
    config = cls_cfg(**SIZES, **extra)
    model = cls_model(config).eval()
    with torch.no_grad():  # random norm scales and biases so every tensor matters
        for name, p in model.named_parameters():
            if name.endswith(("norm.weight", "bias")):
                p.add_(0.1 * torch.randn_like(p))
    return model


def _compare(model, path, tokens: np.ndarray) -> None:
    cfg, params = load_hf_checkpoint(path)
    with torch.no_grad():
        ref = model(torch.tensor(tokens)).logits.numpy()
    got = np.asarray(forward_logits(cfg, params, jnp.asarray(tokens)))
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, atol=1e-4, rtol=0)


TOKENS = np.random.default_rng(0).integers(0, 64, size=(2, 9))


@pytest.mark.parametrize(
    "family,extra",
    [
        ("llama", dict(rope_theta=5000.0, tie_word_embeddings=False)),
        ("qwen2", dict(tie_word_embeddings=True)),
        ("qwen3", dict(head_dim=16, tie_word_embeddings=False)),
    ],
)
def test_logits_match_transformers(tmp_path, family, extra):
    model = _hf_model(family, **extra)
    model.save_pretrained(tmp_path)
    _compare(model, tmp_path, TOKENS)
    cfg, params = load_hf_checkpoint(tmp_path)
    assert cfg.qk_norm == (family == "qwen3") and cfg.attention_bias == (family == "qwen2")
    assert ("lm_head" in params) == (not extra["tie_word_embeddings"])


def test_sharded_bf16_checkpoint(tmp_path):
    model = _hf_model("qwen3")
    with torch.no_grad():  # make the f32 reference exactly bf16-representable
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).float())
    copy.deepcopy(model).to(torch.bfloat16).save_pretrained(tmp_path, max_shard_size="20KB")
    assert (tmp_path / "model.safetensors.index.json").exists()
    _compare(model, tmp_path, TOKENS)


def test_bad_checkpoints_name_the_tensor(tmp_path):
    from safetensors.numpy import load_file, save_file

    model = _hf_model("llama")
    model.save_pretrained(tmp_path / "ok")
    tensors = load_file(str(tmp_path / "ok" / "model.safetensors"))
    for case, edit in {
        "missing": lambda t: t.pop("model.layers.1.mlp.up_proj.weight"),
        "shape": lambda t: t.update({"model.norm.weight": np.ones(31, np.float32)}),
        "extra": lambda t: t.update(
            {"model.layers.0.self_attn.q_proj.bias": np.ones(32, np.float32)}
        ),
    }.items():
        bad = tmp_path / case
        shutil.copytree(tmp_path / "ok", bad)
        edited = dict(tensors)
        edit(edited)
        save_file(edited, str(bad / "model.safetensors"))
        name = {"missing": "up_proj", "shape": "model.norm.weight", "extra": "q_proj.bias"}[case]
        with pytest.raises(ValueError, match=name):
            load_hf_checkpoint(bad)
    cfg = json.loads((tmp_path / "ok" / "config.json").read_text())
    (tmp_path / "ok" / "config.json").write_text(json.dumps({**cfg, "model_type": "gpt2"}))
    with pytest.raises(ValueError, match="model_type"):
        load_hf_checkpoint(tmp_path / "ok")


def test_tokenizer_from_tokenizer_json(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {"[UNK]": 0, "hello": 1, "world": 2}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    loaded = load_hf_tokenizer(tmp_path)
    assert loaded.encode("hello world foo").ids == [1, 2, 0]
    with pytest.raises(FileNotFoundError, match=r"tokenizer\.json"):
        load_hf_tokenizer(tmp_path / "nope")
