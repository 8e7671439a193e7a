"""Pass rate of a config's starting model on its task: greedy, and sampled as the RL rollout
samples (rollout precision and temperature), with samples of the responses.

    python -m experiments.pass_rate --config=configs/smollm2.py --num_prompts=64 --samples=4

--warm_start scores the RL starting point (after the config's SFT, cached) instead of the raw
checkpoint. Prints accuracy, the share of finished (EOS-ended) responses, the share answered with
the bare reference (format kept), garbled share, and a few prompt / response pairs: what picks a
task the model can learn. --json appends the numbers as one JSON line to a file.
"""

from __future__ import annotations

import json

import jax
from absl import app, flags
from ml_collections import config_flags

from calclip_jax.config import build_run_spec
from calclip_jax.data import load_split
from calclip_jax.rollout.generate import max_prompt_len
from calclip_jax.train.evaluate import pass_rate
from calclip_jax.train.sft import starting_params, warm_start
from calclip_jax.train.state import fresh_fp8_meta

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file[:arm].")
_NUM = flags.DEFINE_integer("num_prompts", 64, "Test prompts.")
_SAMPLES = flags.DEFINE_integer("samples", 4, "Sampled responses per prompt (0: greedy only).")
_WARM = flags.DEFINE_bool("warm_start", False, "Score the params after the config's SFT.")
_SHOW = flags.DEFINE_integer("show", 4, "Prompt / response pairs printed per mode.")
_JSON = flags.DEFINE_string("json", None, "Append the numbers as a JSON line to this file.")


def main(argv: list[str]) -> None:
    del argv
    spec = build_run_spec(_CONFIG.value)
    run = spec.config
    splits = {s: load_split(spec.task, s, spec.data_dir) for s in ("train", "test")}
    params, sft = warm_start(spec, splits) if _WARM.value else (starting_params(spec), {})
    test = list(splits["test"][: _NUM.value])
    prompt_len = max_prompt_len(spec.tokenizer, spec.task)
    meta = fresh_fp8_meta(spec.model, spec.rollout_recipe) or None
    modes = [("greedy", 0.0, 1)]
    if _SAMPLES.value:
        modes.append((f"T={run.rollout.temperature:g}", run.rollout.temperature, _SAMPLES.value))
    record = {
        "task": spec.task.name,
        "knobs": spec.task.knobs(),
        "checkpoint": run.model.checkpoint,
        "warm_start": _WARM.value,
        "sft_updates": sft.get("updates", 0),  # as run (SFT stops at sft.target_accuracy)
        "precision": run.rollout.precision,
        "max_new_tokens": run.rollout.max_new_tokens,
    }
    for mode, temperature, num_samples in modes:
        r, examples, texts, finished = pass_rate(
            params, spec, test, prompt_len, jax.random.key(run.seed), num_samples=num_samples,
            temperature=temperature, fp8_meta=meta,
        )  # fmt: skip
        record[mode] = r
        print(
            f"{spec.task.name} {spec.task.data_knobs()}: {len(test)} prompts x {num_samples}, "
            f"{mode}, {run.rollout.precision}: accuracy {r['accuracy']:.3f}, finished "
            f"{r['finished']:.3f}, bare answer {r['bare_answer']:.3f}, garbled {r['garbled']:.3f}"
        )
        for ex, text, done in list(zip(examples, texts, finished, strict=True))[: _SHOW.value]:
            print(f"  {ex.prompt!r} -> {text!r}{'' if done else ' (unfinished)'} [{ex.answer}]")
    if _JSON.value:
        with open(_JSON.value, "a") as f:
            f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    app.run(main)
