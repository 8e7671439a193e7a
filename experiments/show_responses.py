"""Prints what a run sampled at an RL step, from its ratio dump (`log.ratios_every`).

    python -m experiments.show_responses --workdir=runs/x [--step=40] [--sign=neg] \
        [--unfinished] [--limit=20] [--prompts]

One line per response: its row, advantage, length in tokens, `cut` where it did not finish
(what the verifier calls garbled), and the text (with --prompts, the prompt first). Default: the
latest dump, every sign, the first 20.
"""

from __future__ import annotations

import sys

from absl import app, flags, logging

from calclip_jax.config import ConfigError
from calclip_jax.probes.dump_responses import SIGNS, DumpedResponse, dump_responses, select
from calclip_jax.probes.eval_checkpoint import EvalError

_WORKDIR = flags.DEFINE_string("workdir", None, "The run folder.", required=True)
_STEP = flags.DEFINE_integer("step", None, "RL step of the dump; default: the latest.")
_SIGN = flags.DEFINE_enum("sign", "all", list(SIGNS), "Only responses of this advantage sign.")
_UNFINISHED = flags.DEFINE_bool("unfinished", False, "Only responses without an EOS.")
_LIMIT = flags.DEFINE_integer("limit", 20, "At most this many lines (0: all).")
_PROMPTS = flags.DEFINE_bool("prompts", False, "Print each response's prompt before it.")


def line(r: DumpedResponse, prompts: bool) -> str:
    """`row  A=+0.50  35 tok done | 'text'` (the prompt in front with `prompts`)."""
    head = f"{r.row:4d}  A={r.advantage:+.2f}  {r.length:3d} tok {'done' if r.finished else 'cut '}"
    return f"{head} | " + (f"{r.prompt!r} -> " if prompts else "") + repr(r.response)


def main(argv: list[str]) -> None:
    del argv
    try:
        step, responses = dump_responses(_WORKDIR.value, _STEP.value)
    except (EvalError, ConfigError) as err:
        sys.exit(f"show_responses: {err}")
    cut = sum(not r.finished for r in responses)
    mean_len = sum(r.length for r in responses) / max(len(responses), 1)
    shown = select(responses, _SIGN.value, _UNFINISHED.value)
    limit = _LIMIT.value or len(shown)
    print(
        f"{_WORKDIR.value}, RL step {step}: {len(responses)} responses, mean length "
        f"{mean_len:.1f} tokens, {cut} unfinished; {len(shown)} selected, {min(limit, len(shown))} "
        "shown"
    )
    for r in shown[:limit]:
        print(line(r, _PROMPTS.value))


if __name__ == "__main__":
    logging.set_verbosity(logging.WARNING)
    app.run(main)
