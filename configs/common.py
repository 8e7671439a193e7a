"""The base config every family file starts from: every knob, its default, one line each.

Families (`grpo.py`, `dapo.py`, `default.py`) change a few fields; arms (`arms.py`) are named
override sets selected with `--config=configs/<family>.py:<arm>`.
"""

from __future__ import annotations

from ml_collections import ConfigDict


def base_config() -> ConfigDict:
    c = ConfigDict()
    c.seed = 0  # seeds the model init, prompts, sampling and minibatch order (all derived per step)

    c.task = ConfigDict()
    c.task.name = "arithmetic"  # a name from calclip_jax.data.list_tasks()
    c.task.knobs = ConfigDict({"max_digits": 2, "min_digits": 1, "partial_credit": True})
    c.task.data_dir = ""  # tfds data_dir; "" -> <cache_dir>/tfds

    c.model = ConfigDict()
    c.model.preset = ""  # "" -> the sizes below; else a ModelConfig preset (tiny, small, ...)
    c.model.d_model = 64  # residual width
    c.model.n_layers = 2  # decoder blocks
    c.model.n_heads = 4  # query heads
    c.model.n_kv_heads = 2  # key/value heads (GQA)
    c.model.head_dim = 16  # per-head width
    c.model.d_ff = 192  # SwiGLU hidden width
    c.model.qk_norm = False  # Qwen3-style query/key RMSNorm
    c.model.tie_embeddings = True  # lm_head shares the embedding matrix

    c.sft = ConfigDict()
    c.sft.steps = 600  # max SFT steps (stops earlier at target_accuracy)
    c.sft.batch_size = 64  # demonstrations per SFT step
    c.sft.learning_rate = 3e-3  # AdamW peak learning rate (cosine decay)
    c.sft.target_accuracy = 0.5  # stop once greedy test accuracy reaches this (1.0 = never early)
    c.sft.eval_every = 100  # SFT steps between greedy evaluations
    c.sft.cache_dir = ""  # "" -> $XDG_CACHE_HOME/calclip_jax (or ~/.cache/calclip_jax)

    c.rollout = ConfigDict()
    c.rollout.precision = "bf16"  # sampler precision preset: bf16, fp32, fp8_{tensor,delayed,...}
    c.rollout.fwd_format = ""  # "" -> preset; "e5m2" / "e2m1" (FP4) forces weights+activations
    c.rollout.prompts_per_step = 16  # prompts per RL step (B)
    c.rollout.samples_per_prompt = 8  # group size G
    c.rollout.max_new_tokens = 8  # response length cap
    c.rollout.temperature = 1.0  # sampling temperature > 0; the trainer's log-probs use it too
    c.rollout.top_k = 0  # 0 = off (needs correction.mode=none: the trainer can't truncate)
    c.rollout.top_p = 1.0  # 1.0 = off (same)
    c.rollout.max_refill_rounds = 4  # DAPO dynamic sampling: extra rollout rounds to refill

    c.train = ConfigDict()
    c.train.precision = "bf16"  # trainer precision preset (same names as rollout.precision)
    c.train.fwd_format = ""  # "" -> preset; "e5m2" / "e2m1" (FP4) forces weights+activations
    c.train.steps = 30  # RL steps (one rollout batch each)
    c.train.ppo_epochs = 1  # passes over each rollout batch
    c.train.num_minibatches = 2  # minibatch updates per pass
    c.train.learning_rate = 1e-4  # AdamW peak learning rate
    c.train.warmup_updates = 0  # linear warmup (optimizer updates)
    c.train.weight_decay = 0.0  # AdamW weight decay
    c.train.grad_clip_norm = 1.0  # global-norm clipping (0 = off)

    c.rl = ConfigDict()
    c.rl.preset = "grpo"  # grpo | dapo: fills the fields below unless overridden here
    c.rl.eps_low = -1.0  # lower clip epsilon; < 0 -> preset value
    c.rl.eps_high = -1.0  # upper clip epsilon; < 0 -> preset value
    c.rl.dual_clip_c = 0.0  # dual-clip constant for A<0; 0 = off
    c.rl.kl_beta = -1.0  # KL coefficient; < 0 -> preset value
    c.rl.agg = ""  # loss aggregation; "" -> preset value

    c.correction = ConfigDict()
    c.correction.mode = "token_tis"  # none | token_tis | seq_tis | token_mis | seq_mis | geo_reject
    c.correction.tis_cap = 2.0  # TIS cap C
    c.correction.mis_low = 0.5  # MIS/IcePop lower bound
    c.correction.mis_high = 5.0  # MIS/IcePop upper bound
    c.correction.geo_delta = 0.01  # geometric rejection half-width

    c.calibration = ConfigDict()
    c.calibration.enabled = False  # Calibrated Clipping on/off
    c.calibration.period = 1  # calibrate in every K-th RL step (rollout batch)
    c.calibration.ema_beta = 0.0  # EMA of the bounds (0 = none; 0.5 under-corrects at K=1)
    c.calibration.upper_rule = "balance"  # balance | quantile | scaled | fixed
    c.calibration.upper_max = 0.0  # cap of the upper bound; 0 -> 1 + 2 * eps_high
    c.calibration.shadow_precision = "bf16"  # precision of the reference forwards

    c.eval = ConfigDict()
    c.eval.every = 10  # RL steps between greedy evaluations (and at the first and last step)
    c.eval.num_prompts = 128  # test prompts per evaluation

    c.log = ConfigDict()
    c.log.samples_every = 10  # RL steps between sample-response dumps
    c.log.num_samples = 8  # responses per dump
    c.log.checkpoint_every = 10  # RL steps between orbax checkpoints
    c.log.ratios_every = 10  # RL steps between ratio dumps (ratios/step_*.npz; 0 = never)
    c.log.quiet = False  # no progress bar (CI)
    c.log.surge_factor = 1.5  # entropy surge: smoothed entropy > factor x its running minimum
    c.log.surge_warmup = 5  # steps before a surge can be flagged
    c.log.surge_window = 10  # trailing-mean window of the entropy before the test (1 = raw)

    c.mesh = ConfigDict()
    c.mesh.data = -1  # data-parallel axis size (-1: all remaining devices)
    c.mesh.fsdp = 1  # FSDP axis size
    c.mesh.tensor = 1  # tensor-parallel axis size
    return c
