"""How faithful the Hugging Face export is: a checkpoint as the trainer reads it (the shipped
SmolLM2-135M-Instruct GGUF by default), exported with `experiments.export`'s writers, then loaded
by transformers (local files only, float32): its logits on a chat prompt against the trainer's
float32 forward, its tokenizer's chat ids against ours, and the project's importer on the export
against the tree. Needs torch and transformers (the oracle); one JSON line.

    python -m benchmarks.export_fidelity [--checkpoint=smollm2-135m-instruct] [--prompt=...]
"""

from __future__ import annotations

import json
import tempfile

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

from calclip_jax.config.spec import checkpoint_tokenizer
from calclip_jax.data.tokenizer_export import save_checkpoint_tokenizer
from calclip_jax.model import forward_logits, load_checkpoint, load_hf_checkpoint
from calclip_jax.model.checkpoints import resolve_checkpoint
from calclip_jax.model.hf_export import save_hf_checkpoint, source_config

_CHECKPOINT = flags.DEFINE_string("checkpoint", "smollm2-135m-instruct", "model.checkpoint value.")
_PROMPT = flags.DEFINE_string(
    "prompt", "Compute 46 + 22. Reply with only the result, no words.", "The user turn."
)


def main(argv: list[str]) -> None:
    del argv
    import torch
    import transformers

    path = resolve_checkpoint(_CHECKPOINT.value)
    cfg, params = load_checkpoint(path)
    ours_tok = checkpoint_tokenizer(path)
    chat = [{"role": "user", "content": _PROMPT.value}]
    with tempfile.TemporaryDirectory() as out:
        save_hf_checkpoint(out, cfg, params, "float32", source_config(path))
        save_checkpoint_tokenizer(path, out)
        _, back = load_hf_checkpoint(out)
        same = jax.tree.all(jax.tree.map(lambda a, b: bool(np.array_equal(a, b)), back, params))
        tok = transformers.AutoTokenizer.from_pretrained(out, local_files_only=True)
        model = transformers.AutoModelForCausalLM.from_pretrained(out, local_files_only=True)
    text = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    ids = tok(text)["input_ids"]
    with torch.no_grad():
        theirs = model(torch.tensor([ids])).logits.numpy()[0]
    ours = np.asarray(forward_logits(cfg, params, jnp.asarray([ids])))[0]
    gap = np.abs(theirs - ours)
    record = {
        "checkpoint": str(path),
        "tokens": len(ids),
        "chat_ids_equal": ids == ours_tok.encode_chat(chat),
        "import_roundtrip_bit_identical": same,
        "torch_dtype": str(model.dtype),
        "logits_max_abs_diff": float(gap.max()),
        "logits_max_abs_diff_position": int(gap.max(axis=-1).argmax()),
        "logits_max_abs": float(np.abs(ours).max()),
        "argmax_equal": bool((theirs.argmax(-1) == ours.argmax(-1)).all()),
    }
    print(json.dumps(record))


if __name__ == "__main__":
    app.run(main)
