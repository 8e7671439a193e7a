"""HF export: the importer reads the export back bit for bit (every family, tied or not, float32),
bfloat16 is the rounded tree, a fused gate/up kernel exports as the two kernels, and transformers
gives the trainer's float32 logits."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from model_testutil import TINY, init_params, variant

from calclip_jax.model import forward_logits, load_hf_checkpoint
from calclip_jax.model.hf_export import hf_config_dict, hf_tensors, save_hf_checkpoint
from calclip_jax.model.mlp import fuse_gate_up

FAMILIES = {
    "llama_tied": variant(TINY, rope_theta=5000.0, norm_eps=1e-5),
    "llama_untied": variant(TINY, tie_embeddings=False),
    "qwen2": variant(TINY, attention_bias=True, rope_theta=1e6),
    "qwen3": variant(TINY, qk_norm=True, tie_embeddings=False, head_dim=16),
}
TOKENS = np.random.default_rng(0).integers(0, TINY.vocab_size, size=(2, 9))


def _params(cfg, seed: int = 0) -> dict:
    """Random params whose norm scales and biases are not their init values (ones, zeros)."""
    params = init_params(cfg, seed)
    rng = np.random.default_rng(seed)

    def perturb(path, x):
        if path[-1].key in ("scale", "bias"):
            return x + jnp.asarray(0.2 * rng.standard_normal(x.shape), jnp.float32)
        return x

    return jax.tree_util.tree_map_with_path(perturb, params)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_import_of_the_export_is_bit_identical(tmp_path, family):
    cfg = FAMILIES[family]
    params = _params(cfg)
    save_hf_checkpoint(tmp_path, cfg, params)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == family.split("_")[0] and config["torch_dtype"] == "float32"
    got_cfg, got = load_hf_checkpoint(tmp_path)
    assert got_cfg == cfg
    assert jax.tree.structure(got) == jax.tree.structure(params)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(params), strict=True):
        assert a.dtype == b.dtype == jnp.float32
        np.testing.assert_array_equal(a, b)


def test_bfloat16_export_is_the_rounded_tree(tmp_path):
    cfg = FAMILIES["qwen3"]
    params = _params(cfg, seed=1)
    save_hf_checkpoint(tmp_path, cfg, params, dtype="bfloat16")
    assert json.loads((tmp_path / "config.json").read_text())["torch_dtype"] == "bfloat16"
    _, got = load_hf_checkpoint(tmp_path)
    rounded = jax.tree.map(lambda x: np.asarray(x).astype(ml_dtypes.bfloat16), params)
    jax.tree.map(lambda a, b: np.testing.assert_array_equal(a, b.astype(np.float32)), got, rounded)
    changed = jax.tree.map(lambda a, b: not np.array_equal(a, b), got, params)
    assert any(jax.tree.leaves(changed))  # a real rounding, not a float32 copy


def test_fused_gate_up_exports_as_the_two_kernels():
    cfg = FAMILIES["llama_untied"]
    params = _params(cfg, seed=2)
    fused = fuse_gate_up(params)
    assert "gate_up_proj" in fused["layers_0"]["mlp"]
    plain, split = hf_tensors(cfg, params), hf_tensors(cfg, fused)
    assert sorted(plain) == sorted(split)
    for name in plain:
        np.testing.assert_array_equal(plain[name], split[name])


def test_wrong_trees_and_configs_are_named():
    cfg = FAMILIES["llama_tied"]
    params = _params(cfg)
    missing = {**params, "layers_1": {k: v for k, v in params["layers_1"].items() if k != "mlp"}}
    with pytest.raises(ValueError, match="layers_1/mlp/gate_proj/kernel"):
        hf_tensors(cfg, missing)
    with pytest.raises(ValueError, match="lm_head/kernel has no HF tensor"):
        hf_tensors(cfg, {**params, "lm_head": {"kernel": jnp.zeros((32, 64))}})
    bad_norm = {**params, "final_norm": {"scale": jnp.ones(31)}}
    with pytest.raises(ValueError, match=r"final_norm/scale has shape \(31,\)"):
        hf_tensors(cfg, bad_norm)
    with pytest.raises(ValueError, match="qk_norm"):
        hf_config_dict(variant(cfg, qk_norm=True, attention_bias=True))
    with pytest.raises(ValueError, match="dtype"):
        hf_config_dict(cfg, dtype="float16")


def test_base_config_keys_are_kept_and_the_architecture_is_ours():
    base = {"bos_token_id": 1, "max_position_embeddings": 77, "rope_scaling": None, "dtype": "x"}
    config = hf_config_dict(FAMILIES["qwen2"], "bfloat16", {**base, "model_type": "llama"})
    assert config["model_type"] == "qwen2" and config["architectures"] == ["Qwen2ForCausalLM"]
    assert (config["bos_token_id"], config["max_position_embeddings"]) == (1, 77)
    assert "rope_scaling" not in config and "dtype" not in config
    assert config["torch_dtype"] == "bfloat16"


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_transformers_gives_the_trainer_logits(tmp_path, family):
    torch = pytest.importorskip("torch", reason="torch not installed (CI installs it on 3.11)")
    transformers = pytest.importorskip("transformers", reason="transformers not installed")
    cfg = FAMILIES[family]
    params = _params(cfg, seed=3)
    save_hf_checkpoint(tmp_path, cfg, params)
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, local_files_only=True)
    assert model.dtype == torch.float32
    with torch.no_grad():
        theirs = model(torch.tensor(TOKENS)).logits.numpy()
    ours = np.asarray(forward_logits(cfg, params, jnp.asarray(TOKENS)))
    assert np.abs(ours).max() > 0.1  # logits large enough for the bound to mean something
    np.testing.assert_allclose(theirs, ours, atol=1e-5, rtol=0)
