"""Granularity sweep: BF16, FP8 rollout only, and full FP8 at each scaling granularity with TIS,
and with TIS + Calibrated Clipping (upper rule `balance`). Arms come from configs/arms.py.

  python -m experiments.sweep --config=configs/sweep_granularity.py[:OPTIONS] --workdir=DIR

OPTIONS, comma-separated: `tiny` (3 arms, 4 RL steps, a 1-layer d=32 model, small batches: CI /
notebook tests), `dapo` (DAPO instead of GRPO), `steps=N` (RL steps), `seeds=N` (seeds 0..N-1 per
arm).
"""

from __future__ import annotations

from ml_collections import ConfigDict

from calclip_jax.config.config_dict import ConfigError
from configs.arms import ARMS, FP8_PRESET_SUFFIXES

TINY_ARMS = ("bf16", "fp8_tensor_tis", "fp8_tensor_tis_calib")
TINY_COMMON = {  # shrinks a run to seconds on a CPU
    "train.steps": 4,
    "model.d_model": 32,
    "model.n_layers": 1,
    "model.n_heads": 2,
    "model.n_kv_heads": 1,
    "model.d_ff": 64,
    "sft.updates": 20,
    "rollout.prompts_per_step": 4,
    "rollout.samples_per_prompt": 4,
    "eval.every": 2,
    "eval.num_prompts": 16,
    "log.samples_every": 2,
    "log.checkpoint_every": 2,
    "log.quiet": True,
}


def arm_names() -> list[str]:
    """bf16, fp8_rollout, then per FP8 preset fp8_<s> the arms fp8_<s>_tis, fp8_<s>_tis_calib."""
    names = ["bf16", "fp8_rollout"]
    for s in FP8_PRESET_SUFFIXES:
        names += [f"fp8_{s}_tis", f"fp8_{s}_tis_calib"]
    return names


def arm_overrides(name: str) -> dict:
    """The arm's overrides from configs/arms.py, TIS made explicit, `balance` on calibrated arms."""
    overrides = {"correction.mode": "token_tis", **ARMS[name]}
    if overrides.get("calibration.enabled"):
        overrides["calibration.upper_rule"] = "balance"
    return overrides


OPTIONS = ("tiny", "dapo", "steps=N", "seeds=N")  # what `:OPTIONS` may hold (comma-separated)


def _parse(arg: str) -> dict[str, str]:
    options: dict[str, str] = {}
    for token in filter(None, (t.strip() for t in arg.split(","))):
        key, _, value = token.partition("=")
        if key not in {o.split("=")[0] for o in OPTIONS}:
            raise ConfigError(
                f"sweep_granularity: unknown option {token!r}; allowed: {', '.join(OPTIONS)}"
            )
        options[key] = value
    return options


def get_config(arg: str = "") -> ConfigDict:
    options = _parse(arg)
    names = list(TINY_ARMS) if "tiny" in options else arm_names()
    common: dict = {"rl.preset": "dapo" if "dapo" in options else "grpo"}
    if "tiny" in options:
        common.update(TINY_COMMON)
    if options.get("steps"):
        common["train.steps"] = int(options["steps"])
    c = ConfigDict()
    c.base = "configs/grpo.py"  # train config file; rl.preset in `common` picks GRPO or DAPO
    c.arms = ConfigDict({n: arm_overrides(n) for n in names}, allow_dotted_keys=True)
    c.seeds = list(range(int(options["seeds"]))) if options.get("seeds") else []
    c.common = ConfigDict(common, allow_dotted_keys=True)
    return c
