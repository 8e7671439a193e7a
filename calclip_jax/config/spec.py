"""RunConfig -> RunSpec: the typed objects a run uses, resolved once, and the record of them.

`build_run_spec` is the one place where presets are looked up and "unset" (None) values are
resolved; everything downstream reads the spec. `resolved_record(spec)` is what config.json
stores beside the knobs, so a reader never recomputes a clip bound or a precision preset.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path
from typing import Any

from ml_collections import ConfigDict

from calclip_jax.config.config_dict import ConfigError, keyed_error, parse
from calclip_jax.config.schema import DELAYED_SCALES, ModelSizes, RLOverrides, RunConfig
from calclip_jax.data import CharTokenizer, GGUFTokenizer, HFTokenizer, Task, Tokenizer, get_task
from calclip_jax.data.rewards import RewardMix
from calclip_jax.fp8 import PRESETS, PrecisionRecipe
from calclip_jax.fp8.vocabulary import SCALED_FORMATS
from calclip_jax.model import ModelConfig, load_hf_tokenizer, resolve_checkpoint
from calclip_jax.model.checkpoints import checkpoint_config
from calclip_jax.model.shared_prompt import PromptGroups
from calclip_jax.rl.calibration import CalibrationConfig
from calclip_jax.rl.presets import RLPreset, get_preset

FWD_FORMATS = SCALED_FORMATS  # a forward format replacing the preset's
MODEL_SIZES = tuple(
    f.name for f in dataclasses.fields(ModelSizes) if f.name not in ("checkpoint", "preset")
)
RL_KNOBS = tuple(f.name for f in dataclasses.fields(RLOverrides))


@dataclasses.dataclass(frozen=True)
class UpdateConfig:
    """What the jitted update step closes over; `build_run_spec` builds it from the run config
    (no defaults of its own)."""

    recipe: PrecisionRecipe  # the trainer's precision
    rl: RLPreset  # the resolved RL preset (clip, loss aggregation, KL, correction)
    calibration: CalibrationConfig
    temperature: float  # the sampler's: log-probs are of softmax(logits / temperature)
    logprob_chunk: int | None  # positions per log-prob chunk (`batch_logprobs`); None = whole
    shared_prompt: PromptGroups | None  # rows grouped per prompt, run once (`batch_logprobs`)
    micro_batches: int  # gradient accumulation: micro-batches per update (`train/micro_batches`)
    same_forward: bool  # old and new log-probs from one compiled program (`train/forward_program`)
    delayed_scales: str  # "batch" | "update" (`TrainConfig.delayed_scales`)

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0 (the sampling temperature), got {self}")
        if self.logprob_chunk is not None and self.logprob_chunk < 1:
            raise ValueError(f"logprob_chunk must be >= 1 or None, got {self.logprob_chunk}")
        if self.micro_batches < 1:
            raise ValueError(f"micro_batches must be >= 1, got {self.micro_batches}")
        if self.delayed_scales not in DELAYED_SCALES:
            raise ValueError(f"delayed_scales must be one of {DELAYED_SCALES}, got {self}")
        per_update = self.recipe.any_delayed and not self.frozen_scales
        if self.micro_batches > 1 and per_update:
            raise ValueError("micro_batches > 1 takes no delayed_scales='update' recipe")
        if self.same_forward and per_update:
            raise ValueError("same_forward takes no delayed_scales='update' recipe")
        if self.calibration.traces_shadow:
            PrecisionRecipe.preset(self.calibration.shadow_precision)  # validates the name

    @property
    def frozen_scales(self) -> bool:
        """Delayed scaling whose amax history stays as the rollout batch began during its
        updates (`delayed_scales="batch"`): at equal parameters every forward of a batch scales
        alike, so the ratio at theta_old is 1 at every update."""
        return self.recipe.any_delayed and self.delayed_scales == "batch"

    @property
    def shadow_recipe(self) -> PrecisionRecipe:
        """Precision of the shadow (calibration reference) forwards (BF16 by default)."""
        return PrecisionRecipe.preset(self.calibration.shadow_precision)


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """Everything a run needs, resolved from its RunConfig (kept as `config`)."""

    config: RunConfig
    task: Task
    tokenizer: Tokenizer
    model: ModelConfig
    rollout_recipe: PrecisionRecipe
    update: UpdateConfig  # what the jitted update step closes over (trainer recipe, RL, ...)
    cache_dir: str
    data_dir: str
    checkpoint: str | None  # the resolved checkpoint path (`model.checkpoint`), None: fresh
    reward: RewardMix | None = None  # `task.reward`'s functions; None: the task's own verifier


def _check(key: str, fn, *args, **kwargs) -> Any:
    try:
        return fn(*args, **kwargs)
    except (ValueError, TypeError, KeyError) as err:
        raise ConfigError(f"{key}: {err}") from err


def _check_section(key: str, knobs: tuple[str, ...], fn, *args, **kwargs) -> Any:
    """`fn(...)`; its error names `key.<knob>` when it is about one of `knobs`."""
    try:
        return fn(*args, **kwargs)
    except (ValueError, TypeError) as err:
        raise keyed_error(key, err, knobs) from err


def precision_recipe(key: str, preset: str, fwd_format: str | None) -> PrecisionRecipe:
    """A preset, optionally with its forward (weights + activations) format replaced."""
    if preset not in PRESETS:
        raise ConfigError(f"{key}.precision={preset!r}; allowed {list(PRESETS)}")
    if fwd_format is not None and fwd_format not in FWD_FORMATS:
        raise ConfigError(f"{key}.fwd_format={fwd_format!r}; allowed {list(FWD_FORMATS)} or None")
    recipe = PrecisionRecipe.preset(preset)
    if fwd_format is None:
        return recipe
    if not recipe.weights.is_fp8:
        raise ConfigError(f"{key}.fwd_format needs an fp8 precision, got {preset!r}")
    roles = {
        r: dataclasses.replace(getattr(recipe, r), dtype=fwd_format)
        for r in ("weights", "activations")
    }
    return dataclasses.replace(recipe, **roles)


def default_cache_dir() -> str:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "calclip_jax")


def rl_preset(run: RunConfig) -> RLPreset:
    """The named RL preset with the config's overrides (None keeps the preset's value)."""
    base = _check("rl.preset", get_preset, run.rl.preset)
    overrides = {
        k: v for k, v in dataclasses.asdict(run.rl).items() if k != "preset" and v is not None
    }
    max_new = run.rollout.max_new_tokens
    fields = {
        **overrides,
        "dual_clip_c": run.rl.dual_clip_c,  # None = off
        "overlong_max_len": max_new,
        "overlong_cache_len": max(1, max_new // 4),
        "correction": run.correction,
    }
    return _check_section("rl", RL_KNOBS, dataclasses.replace, base, **fields)


def check_sampling(run: RunConfig, rl: RLPreset) -> None:
    """The trainer reproduces softmax(logits / T) but not top-k / top-p truncation, so the
    corrections (which compare the two) reject it."""
    r = run.rollout
    if (r.top_k is not None or r.top_p < 1.0) and rl.correction.mode != "none":
        raise ConfigError(
            f"rollout.top_k={r.top_k} / rollout.top_p={r.top_p}: the trainer cannot reproduce a "
            f"truncated sampling distribution, so correction.mode={rl.correction.mode!r} would "
            "compare different distributions; use top_k=None, top_p=1.0 or correction.mode=none"
        )


def shared_prompt(run: RunConfig) -> PromptGroups | None:
    """The prompt groups of `train.share_prompt`: every minibatch must hold whole groups."""
    if not run.train.share_prompt:
        return None
    r, t = run.rollout, run.train
    if r.prompts_per_step % t.num_minibatches:
        raise ConfigError(
            f"train.share_prompt: rollout.prompts_per_step={r.prompts_per_step} groups do not "
            f"split into train.num_minibatches={t.num_minibatches} minibatches of whole groups"
        )
    presets = {"train.precision": t.precision}  # a preset's scaling (fwd_format keeps it)
    if run.calibration.traces_shadow:
        presets["calibration.shadow_precision"] = run.calibration.shadow_precision
    for key, name in presets.items():
        if PrecisionRecipe.preset(name).any_delayed:
            raise ConfigError(
                f"train.share_prompt: {key}={name!r} has delayed scaling, whose amax histories "
                "would observe two forwards per update"
            )
    return PromptGroups(r.samples_per_prompt, r.max_new_tokens)


def micro_batches(run: RunConfig) -> int:
    """`train.micro_batches`, checked: each minibatch splits into that many micro-batches (of
    whole prompt groups with `train.share_prompt`), and no delayed scaling."""
    t, r = run.train, run.rollout
    n = t.micro_batches
    if n == 1:
        return n
    rows = r.batch_size // t.num_minibatches
    group = r.samples_per_prompt if t.share_prompt else 1
    if rows % (n * group):
        raise ConfigError(
            f"train.micro_batches={n} does not split a minibatch of {rows} rows "
            f"(rollout batch / train.num_minibatches)"
            + (f" into whole groups of {group} (train.share_prompt)" if group > 1 else "")
        )
    if PrecisionRecipe.preset(t.precision).any_delayed and t.delayed_scales == "update":
        raise ConfigError(
            f"train.micro_batches={n}: train.precision={t.precision!r} has delayed scaling with "
            "train.delayed_scales='update', whose amax histories would observe each "
            "micro-batch's forward twice (use 'batch')"
        )
    return n


def same_forward(run: RunConfig) -> bool:
    """`train.same_forward` (on by default), checked: not with per-update delayed scales."""
    t = run.train
    delayed = PrecisionRecipe.preset(t.precision).any_delayed
    if t.same_forward and delayed and t.delayed_scales == "update":
        raise ConfigError(
            f"train.same_forward=True (the default): train.precision={t.precision!r} has "
            "delayed scaling with train.delayed_scales='update', whose amax histories would "
            "observe every call of the forward program; set train.delayed_scales='batch' "
            "(scales frozen within a rollout batch) or train.same_forward=false"
        )
    return t.same_forward


def check_calibration(run: RunConfig, rl: RLPreset) -> None:
    """The shadow precision is a preset; a set `upper_max` caps the calibrated upper bound and a
    set `lower_min` floors the lower one, so neither may cut off the static bound (1 + eps_high,
    1 - eps_low), which calibration reproduces when the FP8 and reference ratios agree."""
    c = run.calibration
    if c.shadow_precision not in PRESETS:
        raise ConfigError(
            f"calibration.shadow_precision={c.shadow_precision!r}; allowed {list(PRESETS)}"
        )
    static_upper = rl.clip_bounds[1]
    if c.enabled and c.upper_max is not None and c.upper_max < static_upper:
        raise ConfigError(
            f"calibration.upper_max={c.upper_max} is below the static upper clip bound "
            f"1 + rl.eps_high = {static_upper:g}"
        )
    static_lower = rl.clip_bounds[0]
    if c.enabled and c.lower_min is not None and c.lower_min > static_lower:
        raise ConfigError(
            f"calibration.lower_min={c.lower_min} is above the static lower clip bound "
            f"1 - rl.eps_low = {static_lower:g}"
        )


@functools.lru_cache(maxsize=4)  # a sweep builds many specs from one checkpoint
def checkpoint_tokenizer(path: Path) -> Tokenizer:
    """The tokenizer a checkpoint ships: a GGUF's (with its chat template) or tokenizer.json."""
    if path.is_file():
        return GGUFTokenizer.from_gguf(path)
    return HFTokenizer(load_hf_tokenizer(path))


_cached_checkpoint_config = functools.lru_cache(maxsize=4)(checkpoint_config)


def model_config(run: RunConfig, vocab_size: int) -> ModelConfig:
    m = run.model
    if m.preset is not None:
        cfg = _check("model.preset", ModelConfig.preset, m.preset)
        return dataclasses.replace(cfg, vocab_size=vocab_size)
    sizes = {k: getattr(m, k) for k in MODEL_SIZES}
    return _check_section("model", MODEL_SIZES, ModelConfig, vocab_size=vocab_size, **sizes)


def build_run_spec(config: RunConfig | ConfigDict) -> RunSpec:
    """Validates the config and builds the run objects; raises ConfigError naming the key."""
    run = config if isinstance(config, RunConfig) else parse(config)
    t = run.task
    task = _check(f"task (name={t.name!r})", get_task, t.name, **t.knobs)
    checkpoint = None
    if run.model.checkpoint is not None:
        checkpoint = _check("model.checkpoint", resolve_checkpoint, run.model.checkpoint)
        tokenizer = _check("model.checkpoint", checkpoint_tokenizer, checkpoint)
        model = _check("model.checkpoint", _cached_checkpoint_config, checkpoint)
    else:
        tokenizer = CharTokenizer.for_tasks(task)
        model = model_config(run, tokenizer.vocab_size)
    rollout_recipe = precision_recipe("rollout", run.rollout.precision, run.rollout.fwd_format)
    train_recipe = precision_recipe("train", run.train.precision, run.train.fwd_format)
    rl = rl_preset(run)
    check_sampling(run, rl)
    check_calibration(run, rl)
    update = _check(
        "calibration",
        UpdateConfig,
        recipe=train_recipe,
        rl=rl,
        calibration=run.calibration,
        temperature=float(run.rollout.temperature),
        logprob_chunk=run.train.logprob_chunk,
        shared_prompt=shared_prompt(run),
        micro_batches=micro_batches(run),
        same_forward=same_forward(run),
        delayed_scales=run.train.delayed_scales,
    )
    cache_dir = run.sft.cache_dir or default_cache_dir()
    return RunSpec(
        config=run,
        task=task,
        tokenizer=tokenizer,
        model=model,
        rollout_recipe=rollout_recipe,
        update=update,
        cache_dir=cache_dir,
        data_dir=t.data_dir or os.path.join(cache_dir, "tfds"),
        checkpoint=None if checkpoint is None else str(checkpoint),
        reward=None if t.reward is None else _check("task.reward", RewardMix.load, t.reward),
    )


def resolved_record(spec: RunSpec) -> dict[str, Any]:
    """What the run resolved from its config, for config.json's "resolved" section."""
    rl = spec.update.rl
    record = {
        "clip_bounds": list(rl.clip_bounds),
        "rl": rl.to_dict(),
        "rollout_recipe": spec.rollout_recipe.to_dict(),
        "train_recipe": spec.update.recipe.to_dict(),
        "shadow_recipe": (
            spec.update.shadow_recipe.to_dict() if spec.config.calibration.traces_shadow else None
        ),
        "model": spec.model.to_dict(),
        "checkpoint": spec.checkpoint,
        "updates_per_rl_step": spec.config.train.updates_per_rl_step,
        "same_forward": spec.update.same_forward,
        "frozen_scales": spec.update.frozen_scales,
        "rollout_batch": spec.config.rollout.batch_size,
        "shared_prompt": (
            None if spec.update.shared_prompt is None else vars(spec.update.shared_prompt)
        ),
    }
    return record
