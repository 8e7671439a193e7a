"""Scores a run's checkpoint on a split with the run's own config (parameters only).

    python -m experiments.evaluate --workdir=runs/dapo_block [--step=20] [--split=test] \
        [--num_prompts=128] [--samples=4] [--precision=bf16] [--json=evals.jsonl]

Greedy accuracy and the shares (finished, bare answer, garbled) in the run's rollout
precision, or in --precision (so that FP8 and BF16 arms' policies are judged alike);
--samples=K adds the pass rate of K sampled responses per prompt at the rollout temperature.
Defaults: the latest checkpoint, the test split, the run's eval.num_prompts.
"""

from __future__ import annotations

import json
import sys

from absl import app, flags, logging

from calclip_jax.config import ConfigError
from calclip_jax.data import SPLITS
from calclip_jax.probes.eval_checkpoint import EvalError, evaluate_checkpoint

_WORKDIR = flags.DEFINE_string("workdir", None, "A run's workdir (config.json + checkpoints/).")
_STEP = flags.DEFINE_integer("step", None, "RL step of the checkpoint; default: the latest.")
_SPLIT = flags.DEFINE_enum("split", "test", list(SPLITS), "Split to score.")
_NUM = flags.DEFINE_integer("num_prompts", None, "Prompts; default: the run's eval.num_prompts.")
_SAMPLES = flags.DEFINE_integer("samples", 0, "Sampled responses per prompt (0: greedy only).")
_PRECISION = flags.DEFINE_string(
    "precision", None, "Score in this precision instead of the run's rollout precision."
)
_JSON = flags.DEFINE_string("json", None, "Append the record as a JSON line to this file.")
flags.mark_flag_as_required("workdir")


def describe(record: dict) -> str:
    """One line per scored mode."""
    head = f"{record['workdir']} step {record['step']}, {record['split']} split"
    lines = []
    for mode in ("greedy", "sampled"):
        if mode in record:
            r = record[mode]
            lines.append(
                f"{head}, {record['num_prompts']} prompts, {mode} ({record['precision']}): "
                f"accuracy {r['accuracy']:.3f}, finished {r['finished']:.3f}, "
                f"garbled {r['garbled']:.3f} (n={r['n']})"
            )
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    del argv
    try:
        record = evaluate_checkpoint(
            _WORKDIR.value,
            step=_STEP.value,
            split=_SPLIT.value,
            num_prompts=_NUM.value,
            samples=_SAMPLES.value,
            precision=_PRECISION.value,
        )
    except (EvalError, ConfigError) as err:
        sys.exit(f"evaluate: {err}")
    print(describe(record))
    if _JSON.value:
        with open(_JSON.value, "a") as f:
            f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    logging.set_verbosity(logging.WARNING)
    app.run(main)
