"""The responses of a ratio dump as text: what a run sampled at one RL step.

A dump (`log.ratios_every`) keeps each row's token ids (`tokens`, `attn_mask`; the response
under `mask`), and the run's own tokenizer (from its config.json) decodes them. Each row gives
its advantage, its response length in tokens, whether it finished (an EOS within
`rollout.max_new_tokens`: an unfinished response is what the verifier calls garbled), its prompt
and its response.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from calclip_jax.data.tokenizer import Tokenizer
from calclip_jax.probes.eval_checkpoint import EvalError, run_spec_of
from calclip_jax.workdir.ratio_dumps import dump_rows, dump_steps, load_dump

SIGNS = ("all", "neg", "pos", "zero")


@dataclasses.dataclass(frozen=True)
class DumpedResponse:
    """One row of a ratio dump, decoded."""

    row: int
    advantage: float  # the row's advantage (the mean over its response tokens when per token)
    length: int  # response tokens, EOS included
    finished: bool
    prompt: str
    response: str  # up to the EOS


def dump_responses(
    workdir: str | Path, step: int | None = None
) -> tuple[int, list[DumpedResponse]]:
    """(RL step, every row of that step's ratio dump decoded); default: the latest dump."""
    steps = dump_steps(workdir)
    if not steps:
        raise EvalError(f"{workdir}: no ratio dumps (the run set no log.ratios_every)")
    step = max(steps) if step is None else step
    if step not in steps:
        raise EvalError(f"{workdir}: no ratio dump at RL step {step}; dumps at {sorted(steps)}")
    return step, decode_dump(steps[step], run_spec_of(workdir).tokenizer)


def decode_dump(path: Path, tokenizer: Tokenizer) -> list[DumpedResponse]:
    """Every row of the ratio dump at `path`, decoded with the run's `tokenizer`."""
    rows = dump_rows(path)
    if rows is None:
        raise EvalError(f"{path}: written before dumps kept the rows' token ids")
    mask = rows["response_mask"] > 0
    per_token = np.asarray(load_dump(path)["advantages"], np.float64)  # [B, T]
    advantages = np.where(mask, per_token, 0.0).sum(-1) / np.maximum(mask.sum(-1), 1)
    out = []
    for i, (ids, attn, resp) in enumerate(
        zip(rows["tokens"], rows["attn_mask"], mask, strict=True)
    ):
        start = int(np.argmax(resp)) if resp.any() else len(ids)
        prompt_ids = ids[:start][attn[:start] > 0]
        text, finished = tokenizer.decode_response(ids[resp])
        out.append(
            DumpedResponse(
                row=i,
                advantage=float(advantages[i]),
                length=int(resp.sum()),
                finished=finished,
                prompt=tokenizer.decode(prompt_ids),
                response=text,
            )
        )
    return out


def select(
    responses: Sequence[DumpedResponse], sign: str = "all", unfinished: bool = False
) -> list[DumpedResponse]:
    """The responses with advantage of `sign` (SIGNS), only the unfinished ones if asked."""
    if sign not in SIGNS:
        raise ValueError(f"sign must be one of {SIGNS}, got {sign!r}")
    signs = {"all": (-1, 0, 1), "neg": (-1,), "pos": (1,), "zero": (0,)}[sign]
    return [
        r for r in responses if np.sign(r.advantage) in signs and not (unfinished and r.finished)
    ]
