"""Greedy pass rate of a config's starting model (no SFT, no RL) on its task, with samples.

    python -m experiments.pass_rate --config=configs/smollm2.py \
        --config.task.knobs.max_digits=1 --num_prompts=64

Prints accuracy, mean reward and garbled share over the first --num_prompts test prompts, in the
rollout precision, and a few prompt / response pairs: what picks a task the model can learn.
"""

from __future__ import annotations

import jax
from absl import app, flags
from ml_collections import config_flags

from calclip_jax.config import build_run_spec
from calclip_jax.data import load_split
from calclip_jax.train.evaluate import greedy_responses, max_prompt_len
from calclip_jax.train.sft import starting_params
from calclip_jax.train.state import init_variables

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file[:arm].")
_NUM = flags.DEFINE_integer("num_prompts", 64, "Test prompts.")
_SHOW = flags.DEFINE_integer("show", 5, "Prompt / response pairs printed.")


def main(argv: list[str]) -> None:
    del argv
    spec = build_run_spec(_CONFIG.value)
    run = spec.config
    params = starting_params(spec)
    test = load_split(spec.task, "test", spec.data_dir)[: _NUM.value]
    prompt_len = max_prompt_len(spec.tokenizer, spec.task)
    meta = init_variables(spec.model, spec.rollout_recipe, jax.random.key(0))[1] or None
    texts, finished, scores = greedy_responses(
        params, spec.model, spec.rollout_recipe, spec.tokenizer, spec.task, test, prompt_len,
        run.rollout.max_new_tokens, fp8_meta=meta,
    )  # fmt: skip
    print(
        f"{spec.task.name} {spec.task.data_knobs()}: {len(test)} prompts, greedy, "
        f"{run.rollout.precision}: accuracy {scores['correct'].mean():.3f}, reward "
        f"{scores['reward'].mean():.3f}, garbled {scores['garbled'].mean():.3f}"
    )
    for ex, text, done in list(zip(test, texts, finished, strict=True))[: _SHOW.value]:
        print(f"  {ex.prompt!r} -> {text!r}{'' if done else ' (unfinished)'} [{ex.answer}]")


if __name__ == "__main__":
    app.run(main)
