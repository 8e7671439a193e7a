"""experiments.export end to end: a 2-step run from a 1-block slice of the shipped SmolLM2 GGUF
prints the export command; the export holds the trained checkpoint bit for bit, and transformers
(local files only) loads it with the GGUF's tokenizer and chat template and gives the trainer's
float32 logits. Bad workdirs, steps and outputs, and runs from a fresh model, fail in one line."""

from __future__ import annotations

import json
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from experiments_testutil import slice_gguf, tiny_config
from run_fixtures import make_run
from shipped_model import shipped_gguf
from subprocess_env import one_device_env
from train_cli import REPO, TinyTrain

from calclip_jax.model import forward_logits, load_checkpoint, load_hf_checkpoint
from calclip_jax.probes.export_checkpoint import ExportError, export_run, restore_run_params

CHAT = [{"role": "user", "content": "Compute 46 + 22. Reply with only the result, no words."}]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(workdir, the training output, the sliced GGUF) of a finished 2-step run."""
    src = shipped_gguf()
    root = tmp_path_factory.mktemp("export")
    sliced = slice_gguf(str(src), str(root / "smollm2_1l.gguf"), 1)
    overrides = {
        "model.checkpoint": sliced,
        "rollout.prompts_per_step": 2,
        "rollout.samples_per_prompt": 2,
        "train.num_minibatches": 1,
        "train.logprob_chunk": 8,
        "sft.updates": 2,
        "sft.batch_size": 4,
        "sft.eval_every": 2,
        "eval.every": 2,
        "eval.num_prompts": 2,
        "log.checkpoint_every": 1,
        "log.ratios_every": 100,
    }
    out = TinyTrain(root, 2, overrides).finish(root / "run")
    return root / "run", out, sliced


def _export_cli(*flags: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "experiments.export", *flags]
    return subprocess.run(
        cmd, cwd=REPO, env=one_device_env(), capture_output=True, text=True, timeout=300
    )


def test_the_summary_prints_the_export_command(run):
    workdir, out, _ = run
    assert f"python -m experiments.export --workdir={workdir} --out={workdir}_hf" in out


def test_cli_exports_the_latest_checkpoint_for_transformers(run, tmp_path):
    workdir, _, sliced = run
    proc = _export_cli(f"--workdir={workdir}", f"--out={tmp_path / 'hf'}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"step 2 -> {tmp_path / 'hf'} (float32" in proc.stdout
    spec, params, step = restore_run_params(workdir, None)
    assert step == 2
    cfg, exported = load_hf_checkpoint(tmp_path / "hf")
    assert cfg == spec.model and cfg.n_layers == 1
    assert jax.tree.structure(exported) == jax.tree.structure(params)
    jax.tree.map(np.testing.assert_array_equal, exported, params)
    _, start = load_checkpoint(sliced)  # training moved the weights: not the GGUF's
    moved = jax.tree.leaves(jax.tree.map(lambda a, b: not np.array_equal(a, b), start, params))
    assert any(moved)
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["max_position_embeddings"] == 8192 and config["eos_token_id"] == 2

    torch = pytest.importorskip("torch", reason="torch not installed (CI installs it on 3.11)")
    transformers = pytest.importorskip("transformers", reason="transformers not installed")
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf", local_files_only=True)
    text = tokenizer.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    assert text == spec.tokenizer.apply_chat_template(CHAT)
    ids = tokenizer(text)["input_ids"]
    assert ids == spec.tokenizer.encode_chat(CHAT)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path / "hf", local_files_only=True
    )
    with torch.no_grad():
        theirs = model(torch.tensor([ids])).logits.numpy()
    ours = np.asarray(forward_logits(spec.model, params, jnp.asarray([ids])))
    np.testing.assert_allclose(theirs, ours, atol=1e-4, rtol=0)


def test_step_and_bfloat16(run, tmp_path):
    workdir, _, _ = run
    record = export_run(workdir, tmp_path / "bf16", step=1, dtype="bfloat16")
    assert record["step"] == 1
    assert "tokenizer.json" in record["files"] and "model.safetensors" in record["files"]
    assert json.loads((tmp_path / "bf16" / "config.json").read_text())["torch_dtype"] == "bfloat16"
    _, params, _ = restore_run_params(workdir, 1)
    _, exported = load_hf_checkpoint(tmp_path / "bf16")
    rounded = jax.tree.map(lambda x: np.asarray(x, jnp.bfloat16).astype(np.float32), params)
    jax.tree.map(np.testing.assert_array_equal, exported, rounded)


def test_mistakes_are_named(run, tmp_path):
    workdir, _, _ = run
    with pytest.raises(ExportError, match=r"no checkpoint at step 7; steps: \[1, 2\]"):
        export_run(workdir, tmp_path / "a", step=7)
    with pytest.raises(ExportError, match=r"no such directory; the runs in .*: \['run'\]"):
        export_run(workdir.parent / "nope", tmp_path / "a")
    with pytest.raises(ExportError, match=r"not a run's workdir; the runs in it: \['run'\]"):
        export_run(workdir.parent, tmp_path / "a")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(ExportError, match="exists and is not empty"):
        export_run(workdir, tmp_path / "full")
    with pytest.raises(ExportError, match="dtype"):
        export_run(workdir, tmp_path / "a", dtype="float16")
    assert not (tmp_path / "a").exists()


def test_a_run_from_a_fresh_model_is_refused_in_one_line(tmp_path):
    config = json.loads(tiny_config(str(tmp_path / "cache")).to_json())
    fresh = make_run(tmp_path / "fresh", [{"step": 1}], config=config)
    proc = _export_cli(f"--workdir={fresh}", f"--out={tmp_path / 'hf'}")
    assert proc.returncode == 1
    message = proc.stderr.strip()
    assert "\n" not in message and message.startswith("export: ") and "fresh model" in message
    assert not (tmp_path / "hf").exists()
