"""A run that starts from a real checkpoint (`model.checkpoint`): the shipped SmolLM2-135M-Instruct
GGUF cut to 2 blocks. Its tokenizer, chat template and weights replace the character model."""

from __future__ import annotations

import importlib.util
import math

import jax
import pytest
from experiments_testutil import slice_gguf, tiny_config
from train_cli import TinyTrain

from calclip_jax.config import ConfigError, build_run_spec
from calclip_jax.data import GGUFTokenizer, get_task
from calclip_jax.rollout.generate import encode_prompts, max_prompt_len
from calclip_jax.shipped import shipped_file
from calclip_jax.train.sft import starting_params, starting_params_shapes
from calclip_jax.workdir import run_record as R

MODEL = "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def sliced(tmp_path_factory) -> str:
    for module in ("gguf", "jinja2"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} not installed (the `llm` extra)")
    try:
        src = shipped_file(MODEL)
    except FileNotFoundError as err:
        pytest.skip(f"no shipped checkpoint: {err}")
    return slice_gguf(str(src), str(tmp_path_factory.mktemp("ckpt") / "smollm2_2l.gguf"), 2)


def _overrides(checkpoint: str) -> dict:
    return {
        "model.checkpoint": checkpoint,
        "rollout.prompts_per_step": 4,  # 8 rows: one minibatch over the 8 test devices
        "rollout.samples_per_prompt": 2,
        "train.num_minibatches": 1,
        "eval.every": 2,
        "eval.num_prompts": 2,
        "log.ratios_every": 2,
    }


def _config(tmp_path, checkpoint: str, **overrides):
    return tiny_config(str(tmp_path / "cache"), **_overrides(checkpoint), **overrides)


def test_spec_takes_sizes_and_tokenizer_from_the_checkpoint(tmp_path, sliced):
    spec = build_run_spec(_config(tmp_path, sliced))
    assert isinstance(spec.tokenizer, GGUFTokenizer)
    assert (spec.model.n_layers, spec.model.vocab_size, spec.model.d_model) == (2, 49152, 576)
    assert spec.checkpoint == sliced
    # an SFT cache hit restores into these shapes instead of reading the checkpoint
    shape_dtype = lambda tree: jax.tree.map(lambda x: (x.shape, x.dtype), tree)
    assert shape_dtype(starting_params(spec)) == shape_dtype(starting_params_shapes(spec))
    # prompts are encoded as one chat turn, ending in the assistant header
    task = get_task("arithmetic", max_digits=1, partial_credit=True, num_test=16)
    example = task.examples("test")[0]
    tokens, mask = encode_prompts(spec.tokenizer, [example], max_prompt_len(spec.tokenizer, task))
    text = spec.tokenizer.decode(tokens[0][mask[0] == 1])
    assert example.prompt in text and text.rstrip().endswith("assistant")
    with pytest.raises(ConfigError, match=r"model\.checkpoint"):
        build_run_spec(_config(tmp_path, str(tmp_path / "nope.gguf")))
    with pytest.raises(ConfigError, match="exclusive"):
        build_run_spec(_config(tmp_path, sliced, **{"model.preset": "tiny"}))


def test_rl_run_from_the_checkpoint(tmp_path, sliced):
    """experiments.train in a subprocess on one CPU device: on the test session's 8 simulated
    devices, with its 49,152-token vocabulary, the run takes 1.6x as long (70 s vs 44 s)."""
    small_sft = {"sft.updates": 2, "sft.batch_size": 4, "sft.eval_every": 2}
    overrides = {**_overrides(sliced), **small_sft, "train.logprob_chunk": 8}
    TinyTrain(tmp_path, 2, overrides).finish(tmp_path / "run")
    rows = R.read_metrics(tmp_path / "run")
    assert [r["step"] for r in rows] == [1, 2]
    for name in ("loss", "entropy", "reward_mean", "grad_norm", "clip_frac_lower_neg"):
        assert all(math.isfinite(r[name]) for r in rows), name
    assert rows[0]["ratio_log_abs_max"] == 0.0  # r = 1 at theta_old on the real model too
    resolved = R.load_config(tmp_path / "run")["resolved"]
    assert resolved["checkpoint"] == sliced and resolved["model"]["n_layers"] == 2
