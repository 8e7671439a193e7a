"""The regime built to break: SmolLM2-135M-Instruct on 2-digit addition whose SFT
demonstrations write the working out (`worked_addition`, 34-43 generated tokens), 16 updates per
rollout batch, a 10x larger learning rate than configs/smollm2.py, no KL anchor, 100 RL steps, the
ratio's old and new log-probs from one forward program. Everything else, and the arms, as
configs/smollm2.py. The study's arms (BF16, FP8 per-tensor + TIS, + CalClip at K = 1 and at the
paper's K = 20): configs/smollm2_break_study.py. Why each setting, and the pilot that chose them:
docs/break_regime.md.
"""

from ml_collections import ConfigDict

from configs import smollm2
from configs.arms import apply_overrides

REGIME = {  # over configs/smollm2.py, whose task knobs (2-digit, 2 operands, "+") stay
    "task.name": "worked_addition",
    "rollout.max_new_tokens": 48,  # demonstrations take 33-42 tokens + EOS: 5 to spare
    "train.num_minibatches": 16,  # 16 updates per batch (1 epoch) of 16 x 8: one group each
    "train.learning_rate": 1e-5,  # configs/smollm2.py: 1e-6; 3e-5 halved accuracy in 1 RL step
    "rl.kl_beta": 0.0,  # no KL anchor to the warm start (GRPO's preset: 0.04)
    "train.steps": 100,
    "sft.updates": 30,  # the format by update 10; greedy 0.73, sampled (BF16, T = 1) 0.54 at 30
    "sft.learning_rate": 1e-4,
    "sft.eval_every": 10,
    "sft.target_accuracy": 1.0,  # all 30 updates (no early stop at smollm2's 0.5)
}


def get_config(arm: str = "") -> ConfigDict:
    config = smollm2.get_config(arm)  # the arm; share_prompt unless delayed scaling
    config = apply_overrides(config, REGIME)
    # the ratio's old and new log-probs from one compiled forward, so r = 1 at theta_old at every
    # update, not only the first (delayed scaling too: its scales are frozen within a batch)
    config.train.same_forward = True
    return config
