"""The study of the regime built to break (docs/break_regime.md) as a sweep over
configs/smollm2_break.py: BF16, FP8 per-tensor + TIS, and + Calibrated Clipping at K = 1 and at
the paper's K = 20 (`calibration.period`), at seeds 0, 1 and 2, 100 RL steps each.

  python -m experiments.sweep --config=configs/smollm2_break_study.py:seed0 \
      --workdir=results/smollm2_break [--only=bf16__seed0,fp8_tensor_tis__seed0]

Phases: all (the three seeds), seed0, seed1, seed2; an arm runs in <workdir>/<arm>__seed<N>.
Rerunning the same command skips finished arms and resumes an interrupted one from its last
checkpoint (every 5 RL steps), so a block that outlasts a session continues in the next.
"""

from __future__ import annotations

from ml_collections import ConfigDict

from calclip_jax.config.config_dict import ConfigError
from configs.arms import ARMS

BASE = "configs/smollm2_break.py"
PAPER_PERIOD = 20  # the paper's K: calibrate in RL steps 1, 21, 41, ..., keep the bounds between
STUDY_ARMS = {
    "bf16": ARMS["bf16"],
    "fp8_tensor_tis": ARMS["fp8_tensor_tis"],
    "fp8_tensor_tis_calib": {**ARMS["fp8_tensor_tis_calib"], "calibration.period": 1},
    "fp8_tensor_tis_calib_k20": {
        **ARMS["fp8_tensor_tis_calib"],
        "calibration.period": PAPER_PERIOD,
    },
}
COMMON = {
    "log.quiet": True,
    "log.checkpoint_every": 5,  # a run killed at a session's end loses at most 4 RL steps
    "log.ratios_every": 5,  # ratio dumps to trace clipped A<0 tokens over steps
    "log.trace_dumps": 4,  # each dump rescores the 4 before it: lags 5-20 (clipped_trace)
    "log.samples_every": 5,
    # every arm's BF16 shadow clip shares by sign on its own tokens, at the ratio dumps' interval
    "calibration.shadow_every": 5,
    # one group (about 150 A<0 tokens) per minibatch is too few for a 1% quantile: the calibrating
    # arms pool the RL step's 16 minibatches at theta_1 (about 2400)
    "calibration.sample": "batch",
}
PHASES = {"all": (0, 1, 2), "seed0": (0,), "seed1": (1,), "seed2": (2,)}


def get_config(phase: str = "all") -> ConfigDict:
    if phase not in PHASES:
        raise ConfigError(f"unknown phase {phase!r}; allowed: {sorted(PHASES)}")
    c = ConfigDict()
    c.base = BASE
    c.arms = ConfigDict(STUDY_ARMS, allow_dotted_keys=True)
    c.seeds = list(PHASES[phase])
    c.common = ConfigDict(COMMON, allow_dotted_keys=True)
    return c
