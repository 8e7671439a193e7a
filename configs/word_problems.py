"""Bring your own data: SmolLM2-135M-Instruct on the word problems of a JSONL file the repo ships
(configs/data/word_problems.jsonl, written by configs/data/make_word_problems.py), through the
`file` task, with a weighted reward: the last integer of the response (0.9) and a format check
(0.1). Everything else as configs/smollm2.py, whose arms it takes.

Point `task.knobs.path` at your own file (JSONL rows with "prompt", "answer" and an optional
"system"; field names are knobs) and set `task.reward` (calclip_jax/data/rewards/).
"""

from configs import smollm2

DATA = "configs/data/word_problems.jsonl"  # relative to the repo root, where the CLIs run


def get_config(arm: str = ""):
    config = smollm2.get_config(arm)
    config.task.name = "file"
    config.task.knobs = {"path": DATA, "verifier": "last_integer"}
    config.task.reward = "0.9*last_integer + 0.1*format"
    config.rollout.max_new_tokens = 16  # room for "Mia has 9 pencils left."
    config.sft.updates = 20  # enough to teach bare answers that end within max_new_tokens
    config.sft.eval_every = 20
    return config
