"""ConfigDict -> validated run objects. Every error names the config key at fault.

Validation happens here, before anything is compiled.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from ml_collections import ConfigDict

from calclip_jax.data import CharTokenizer, Task, Tokenizer, get_task
from calclip_jax.fp8 import PRESETS, PrecisionRecipe
from calclip_jax.fp8.vocabulary import SCALED_FORMATS
from calclip_jax.model import ModelConfig
from calclip_jax.rl.corrections import CorrectionConfig
from calclip_jax.rl.presets import RLPreset, get_preset
from calclip_jax.train.config import CalibrationConfig, OptimConfig, UpdateConfig

FWD_FORMATS = ("", *SCALED_FORMATS)  # "": the preset's own forward format


class ConfigError(ValueError):
    """A bad config value; the message starts with the dotted key."""


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """Everything a run needs, built from the config."""

    task: Task
    tokenizer: Tokenizer
    model: ModelConfig
    rollout_recipe: PrecisionRecipe
    step: UpdateConfig
    cache_dir: str
    data_dir: str


def _check(key: str, fn, *args, **kwargs) -> Any:
    try:
        return fn(*args, **kwargs)
    except (ValueError, TypeError, KeyError) as err:
        raise ConfigError(f"{key}: {err}") from err


def precision_recipe(key: str, preset: str, fwd_format: str) -> PrecisionRecipe:
    """A preset, optionally with its forward (weights + activations) format replaced."""
    if preset not in PRESETS:
        raise ConfigError(f"{key}.precision={preset!r}; allowed {list(PRESETS)}")
    if fwd_format not in FWD_FORMATS:
        raise ConfigError(f"{key}.fwd_format={fwd_format!r}; allowed {list(FWD_FORMATS)}")
    recipe = PrecisionRecipe.preset(preset)
    if fwd_format:
        if not recipe.weights.is_fp8:
            raise ConfigError(f"{key}.fwd_format needs an fp8 precision, got {preset!r}")
        roles = {
            r: dataclasses.replace(getattr(recipe, r), dtype=fwd_format)
            for r in ("weights", "activations")
        }
        recipe = dataclasses.replace(recipe, **roles)
    return recipe


def default_cache_dir() -> str:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "calclip_jax")


def rl_preset(c: ConfigDict) -> RLPreset:
    base = _check("rl.preset", get_preset, c.rl.preset)
    fields: dict[str, Any] = {}
    for name in ("eps_low", "eps_high", "kl_beta"):
        if c.rl[name] >= 0:
            fields[name] = float(c.rl[name])
    if c.rl.agg:
        fields["agg"] = c.rl.agg
    fields["dual_clip_c"] = float(c.rl.dual_clip_c)  # 0 = off; RLPreset rejects 0 < c <= 1
    fields["overlong_max_len"] = int(c.rollout.max_new_tokens)
    fields["overlong_cache_len"] = max(1, int(c.rollout.max_new_tokens) // 4)
    fields["correction"] = _check("correction", CorrectionConfig, **c.correction.to_dict())
    return _check("rl", dataclasses.replace, base, **fields)


def check_sampling(c: ConfigDict, rl: RLPreset) -> None:
    """RL rollouts sample at a temperature > 0; the trainer reproduces softmax(logits / T) but
    not top-k / top-p truncation, so the corrections (which compare the two) reject it."""
    r = c.rollout
    if not r.temperature > 0:
        raise ConfigError(f"rollout.temperature must be > 0 for RL rollouts, got {r.temperature}")
    if (r.top_k > 0 or r.top_p < 1.0) and rl.correction.mode != "none":
        raise ConfigError(
            f"rollout.top_k={r.top_k} / rollout.top_p={r.top_p}: the trainer cannot reproduce a "
            f"truncated sampling distribution, so correction.mode={rl.correction.mode!r} would "
            "compare different distributions; use top_k=0, top_p=1.0 or correction.mode=none"
        )


def model_config(c: ConfigDict, vocab_size: int) -> ModelConfig:
    m = c.model
    if m.preset:
        cfg = _check("model.preset", ModelConfig.preset, m.preset)
        return dataclasses.replace(cfg, vocab_size=vocab_size)
    sizes = {
        k: m[k]
        for k in (
            "d_model",
            "n_layers",
            "n_heads",
            "n_kv_heads",
            "head_dim",
            "d_ff",
            "qk_norm",
            "tie_embeddings",
        )
    }
    max_len = 1 + 64 + int(c.rollout.max_new_tokens)
    return _check("model", ModelConfig, vocab_size=vocab_size, max_seq_len=max_len, **sizes)


def build_run_spec(c: ConfigDict) -> RunSpec:
    """Validates `c` and builds the run objects; raises ConfigError naming the key."""
    task = _check(f"task (name={c.task.name!r})", get_task, c.task.name, **c.task.knobs.to_dict())
    tokenizer = CharTokenizer.for_tasks(task)
    rollout_recipe = precision_recipe("rollout", c.rollout.precision, c.rollout.fwd_format)
    train_recipe = precision_recipe("train", c.train.precision, c.train.fwd_format)
    calib = c.calibration.to_dict()
    calib["upper_max"] = calib["upper_max"] or None
    rl = rl_preset(c)
    check_sampling(c, rl)
    step = UpdateConfig(
        temperature=float(c.rollout.temperature),
        recipe=train_recipe,
        rl=rl,
        calibration=_check("calibration", CalibrationConfig, **calib),
        optim=_check(
            "train",
            OptimConfig,
            learning_rate=c.train.learning_rate,
            warmup_updates=c.train.warmup_updates,
            weight_decay=c.train.weight_decay,
            grad_clip_norm=c.train.grad_clip_norm,
        ),
    )
    for key in (
        "train.steps",
        "train.ppo_epochs",
        "train.num_minibatches",
        "rollout.prompts_per_step",
        "rollout.samples_per_prompt",
        "rollout.max_new_tokens",
        "eval.every",
        "log.checkpoint_every",
        "log.surge_window",
    ):
        section, name = key.split(".")
        if int(c[section][name]) < 1:
            raise ConfigError(f"{key} must be >= 1, got {c[section][name]}")
    batch = c.rollout.prompts_per_step * c.rollout.samples_per_prompt
    if batch % c.train.num_minibatches:
        raise ConfigError(
            f"train.num_minibatches={c.train.num_minibatches} must divide the "
            f"rollout batch prompts_per_step x samples_per_prompt = {batch}"
        )
    cache_dir = c.sft.cache_dir or default_cache_dir()
    return RunSpec(
        task=task,
        tokenizer=tokenizer,
        model=model_config(c, tokenizer.vocab_size),
        rollout_recipe=rollout_recipe,
        step=step,
        cache_dir=cache_dir,
        data_dir=c.task.data_dir or os.path.join(cache_dir, "tfds"),
    )
