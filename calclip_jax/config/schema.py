"""The run config schema: every knob of a run, its type and its one default, section by section.

The ConfigDict that families (`configs/*.py`) and the command line edit is generated from these
dataclasses (`config_dict.base_config`), and parsed back into them (`config_dict.parse`), so a
default is written here and nowhere else. "Unset" is spelled `None` everywhere: the consumer's
rule applies (named in the field's comment).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from calclip_jax.analysis.surge import SURGE_FACTOR, SURGE_WARMUP, SURGE_WINDOW
from calclip_jax.data.rewards.spelling import parse_reward
from calclip_jax.knob_rules import above, at_least, one_of, within
from calclip_jax.rl.calibration import CalibrationConfig
from calclip_jax.rl.corrections import CorrectionConfig
from calclip_jax.rollout.sampling import SAMPLERS

SCHEDULES = ("constant", "cosine", "linear")
DELAYED_SCALES = ("batch", "update")  # `train.delayed_scales`
MAX_SEED = 2**32 - 1


@dataclasses.dataclass(frozen=True)
class TaskConfig:
    name: str = "arithmetic"  # a name from calclip_jax.data.list_tasks()
    knobs: dict[str, Any] = dataclasses.field(
        default_factory=lambda: {"max_digits": 2, "min_digits": 1, "partial_credit": True}
    )  # the task's data knobs
    data_dir: str | None = None  # tfds data_dir; None -> <sft.cache_dir>/tfds
    reward: str | None = None  # weighted reward terms, "0.8*exact + 0.2*format" (built-ins or
    # module:function, calclip_jax/data/rewards/); None -> the task's own verifier's reward

    def __post_init__(self) -> None:
        if self.reward is not None:
            parse_reward(self.reward)  # the spelling; functions are imported by the run spec


@dataclasses.dataclass(frozen=True)
class ModelSizes:
    checkpoint: str | None = None  # a .gguf file, an HF directory or a built-in name
    # ("smollm2-135m-instruct"): its weights, sizes and tokenizer; None -> a fresh model
    preset: str | None = None  # a ModelConfig preset (tiny, small, ...); None -> the sizes below
    d_model: int = 64  # residual width
    n_layers: int = 2  # decoder blocks
    n_heads: int = 4  # query heads
    n_kv_heads: int = 2  # key/value heads (GQA)
    head_dim: int = 16  # per-head width
    d_ff: int = 192  # SwiGLU hidden width
    qk_norm: bool = False  # Qwen3-style query/key RMSNorm
    tie_embeddings: bool = True  # lm_head shares the embedding matrix

    def __post_init__(self) -> None:
        if self.checkpoint is not None and self.preset is not None:
            raise ValueError("checkpoint and preset are exclusive: a checkpoint has its sizes")


@dataclasses.dataclass(frozen=True)
class SFTConfig:
    updates: int = 600  # max SFT optimizer updates (stops earlier at target_accuracy)
    batch_size: int = 64  # demonstrations per SFT update
    learning_rate: float = 3e-3  # AdamW peak learning rate (cosine decay)
    target_accuracy: float = 0.5  # stop once greedy test accuracy reaches this (1.0 = never)
    eval_every: int = 100  # SFT updates between greedy evaluations
    cache_dir: str | None = None  # None -> $XDG_CACHE_HOME/calclip_jax (or ~/.cache/calclip_jax)

    def __post_init__(self) -> None:
        at_least(self, 0, "updates")
        at_least(self, 1, "batch_size", "eval_every")
        above(self, 0, "learning_rate")
        within(self, "target_accuracy", "[0, 1]")


@dataclasses.dataclass(frozen=True)
class RolloutConfig:
    precision: str = "bf16"  # sampler precision preset: bf16, fp32, fp8_{tensor,delayed,...}
    fwd_format: str | None = None  # None -> the preset's; e5m2 / e2m1 (FP4): weights+activations
    prompts_per_step: int = 16  # prompts per RL step (B)
    samples_per_prompt: int = 8  # group size G
    max_new_tokens: int = 8  # response length cap
    temperature: float = 1.0  # sampling temperature > 0; the trainer's log-probs use it too
    top_k: int | None = None  # None = no truncation (needs correction.mode=none otherwise)
    top_p: float = 1.0  # 1.0 = no truncation (same)
    max_refill_rounds: int = 4  # DAPO dynamic sampling: extra rollout rounds to refill
    sampler: str = "gumbel"  # how a token is drawn (rollout/sampling.py): gumbel (the committed
    # runs'), cdf (the same distribution, other draws: two uniforms a row, faster on a CPU)

    def __post_init__(self) -> None:
        at_least(self, 1, "prompts_per_step", "samples_per_prompt", "max_new_tokens", "top_k")
        at_least(self, 0, "max_refill_rounds")
        above(self, 0, "temperature")
        within(self, "top_p", "(0, 1]")
        one_of(self, "sampler", SAMPLERS)

    @property
    def batch_size(self) -> int:
        """Sequences per rollout batch: prompts_per_step x samples_per_prompt."""
        return self.prompts_per_step * self.samples_per_prompt


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    precision: str = "bf16"  # trainer precision preset (same names as rollout.precision)
    fwd_format: str | None = None  # None -> the preset's; e5m2 / e2m1 (FP4): weights+activations
    steps: int = 30  # RL steps (one rollout batch each)
    ppo_epochs: int = 1  # passes over each rollout batch
    num_minibatches: int = 2  # optimizer updates per pass
    learning_rate: float = 1e-4  # AdamW peak learning rate
    schedule: str = "constant"  # constant | cosine | linear (decay after warmup)
    warmup_updates: int = 0  # linear warmup from 0 (optimizer updates)
    decay_updates: int = 1000  # length of the cosine / linear decay (optimizer updates)
    weight_decay: float = 0.0  # AdamW decoupled weight decay
    b1: float = 0.9  # AdamW
    b2: float = 0.999  # AdamW
    eps: float = 1e-8  # AdamW
    grad_clip_norm: float | None = 1.0  # global-norm clipping; None = off
    logprob_chunk: int | None = None  # positions per lm_head + log-softmax chunk; None = whole
    share_prompt: bool = False  # run each group's prompt once in the trainer's forwards
    micro_batches: int = 1  # gradient accumulation: each minibatch's forward and backward in
    # this many parts of whole groups, gradients summed in float32 (not with delayed scaling)
    same_forward: bool = True  # the ratio's old and new log-probs from one compiled forward
    # program, so r = 1 exactly at theta_old at every update; the backward through a recomputed
    # forward (train/forward_program.py; not with delayed_scales="update")
    delayed_scales: str = "batch"  # delayed scaling: "batch" scales a rollout batch's forwards
    # from the amax history as the batch began (primed before the run's first update), its
    # updates' amaxes pushed for the next batch; "update": each update from the one before

    def __post_init__(self) -> None:
        at_least(self, 1, "steps", "ppo_epochs", "num_minibatches", "logprob_chunk")
        at_least(self, 1, "micro_batches")
        at_least(self, 1, "decay_updates")
        at_least(self, 0, "warmup_updates", "weight_decay")
        one_of(self, "schedule", SCHEDULES)
        one_of(self, "delayed_scales", DELAYED_SCALES)
        above(self, 0, "learning_rate", "eps", "grad_clip_norm")
        within(self, "b1", "[0, 1)")
        within(self, "b2", "[0, 1)")

    @property
    def updates_per_rl_step(self) -> int:
        return self.ppo_epochs * self.num_minibatches


@dataclasses.dataclass(frozen=True)
class RLOverrides:
    """The RL algorithm: a named preset (calclip_jax.rl.presets) and overrides of its fields."""

    preset: str = "grpo"  # grpo | dapo
    eps_low: float | None = None  # lower clip epsilon; None -> the preset's
    eps_high: float | None = None  # upper clip epsilon; None -> the preset's
    dual_clip_c: float | None = None  # dual-clip constant (> 1) for A < 0; None = off
    kl_beta: float | None = None  # KL coefficient; None -> the preset's
    agg: str | None = None  # loss aggregation; None -> the preset's


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    every: int = 10  # RL steps between greedy evaluations (and at the first and last step)
    num_prompts: int = 128  # test prompts per evaluation

    def __post_init__(self) -> None:
        at_least(self, 1, "every", "num_prompts")


@dataclasses.dataclass(frozen=True)
class LogConfig:
    samples_every: int = 10  # RL steps between sample-response dumps
    num_samples: int = 8  # responses per dump
    checkpoint_every: int = 10  # RL steps between orbax checkpoints
    ratios_every: int | None = 10  # RL steps between ratio dumps (ratios/step_*.npz); None = never
    trace_dumps: int = 0  # at a ratio dump, rescore the N latest earlier dumps' rows under the
    # current policy (ratios/trace_step_*.npz: do tokens clipped on A<0 gain probability?); 0 = off
    quiet: bool = False  # no progress bar (CI)
    wandb_project: str | None = None  # Weights & Biases project (needs wandb); None = off
    surge_factor: float = SURGE_FACTOR  # entropy surge: smoothed entropy > factor x running min
    surge_warmup: int = SURGE_WARMUP  # RL steps before a surge can be flagged
    surge_window: int = SURGE_WINDOW  # trailing-mean window of the entropy (1 = raw)

    def __post_init__(self) -> None:
        at_least(self, 1, "samples_every", "checkpoint_every", "ratios_every", "surge_window")
        at_least(self, 0, "num_samples", "surge_warmup", "trace_dumps")
        above(self, 1, "surge_factor")
        if self.trace_dumps and self.ratios_every is None:
            raise ValueError(
                f"trace_dumps={self.trace_dumps} rescores earlier ratio dumps, so it needs "
                "log.ratios_every (None: no dumps); set it or trace_dumps=0"
            )


@dataclasses.dataclass(frozen=True)
class MeshConfig:
    data: int | None = None  # data-parallel axis size; None -> all remaining devices
    fsdp: int = 1  # FSDP axis size
    tensor: int = 1  # tensor-parallel axis size

    def __post_init__(self) -> None:
        at_least(self, 1, "data", "fsdp", "tensor")


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """A whole run. Sections mirror the ConfigDict (`--config.<section>.<knob>=...`)."""

    seed: int = 0  # seeds the model init, prompts, sampling and minibatch order (per RL step)
    task: TaskConfig = dataclasses.field(default_factory=TaskConfig)
    model: ModelSizes = dataclasses.field(default_factory=ModelSizes)
    sft: SFTConfig = dataclasses.field(default_factory=SFTConfig)
    rollout: RolloutConfig = dataclasses.field(default_factory=RolloutConfig)
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
    rl: RLOverrides = dataclasses.field(default_factory=RLOverrides)
    correction: CorrectionConfig = dataclasses.field(default_factory=CorrectionConfig)
    calibration: CalibrationConfig = dataclasses.field(default_factory=CalibrationConfig)
    eval: EvalConfig = dataclasses.field(default_factory=EvalConfig)
    log: LogConfig = dataclasses.field(default_factory=LogConfig)
    mesh: MeshConfig = dataclasses.field(default_factory=MeshConfig)

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")
        if not 0 <= self.seed <= MAX_SEED:
            raise ValueError(f"seed must be in [0, 2**32 - 1], got {self.seed}")
        n, k = self.rollout.batch_size, self.train.num_minibatches
        if n % k:
            raise ValueError(
                f"train.num_minibatches={k} must divide the rollout batch "
                f"rollout.prompts_per_step x rollout.samples_per_prompt = {n}"
            )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
