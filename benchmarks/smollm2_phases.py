"""The real-model RL step's phases as standalone jitted calls, for `ab_smollm2` and
`profile_smollm2 --phase`. Not a script; it defines no flags.

The workload is `bench_smollm2_step`'s (SmolLM2-135M-Instruct through `configs/smollm2.py`'s
defaults and its chat prompts; EOS never stops a row). Its phases:

- `sampler`: one rollout call (`rollout.sampler.sample`) of the step's prompts x group samples;
- `forward`: the log-probs of one minibatch (a quarter of the step's groups, of a batch the
  sampler drew with key 0) through `train.forward.batch_logprobs` with the run's `share_prompt`
  and `logprob_chunk`, no gradient (the updater's reference / old-policy forward);
- `update`: the gradient of sum(log-probs x a fixed cotangent) with respect to the params on
  that minibatch (the model part of an update step: no loss, optimizer or metrics);
- `step`: the whole jitted update step (`train.update_step`: forward and backward, the PPO loss,
  the optimizer and its non-finite guard, the metrics) on that minibatch, with random GRPO
  advantages, through the run's trainer (`train.trainer.run_trainer`).

Each takes the module it runs (`sampler_module`, `forward_module`), so that `ab_smollm2` can run
another revision's code on the same workload.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import bench_smollm2_step as bench
from calclip_jax.config import build_run_spec
from calclip_jax.data import load_split
from calclip_jax.rollout import sampler as checkout_sampler
from calclip_jax.rollout.generate import encode_prompts, max_prompt_len
from calclip_jax.train.sft import starting_params

PHASES = ("sampler", "forward", "update", "step")


@dataclasses.dataclass
class Workload:
    spec: Any
    params: Any
    tokens: np.ndarray  # [prompts, P] left-padded chat prompts
    mask: np.ndarray
    group: int
    new_tokens: int

    def sample_kwargs(self) -> dict[str, Any]:
        return {
            "num_samples": self.group,
            "max_new_tokens": self.new_tokens,
            "temperature": 1.0,
            "eos_id": bench.NO_EOS,
            "pad_id": self.spec.tokenizer.pad_id,
        }


def load_workload(
    arm: str,
    precision: str,
    prompts: int,
    group: int,
    new_tokens: int,
    sets: Any,
    family: str = "smollm2",
) -> Workload:
    """`bench_smollm2_step.workload_config`'s run: its starting params and the first `prompts`
    training prompts."""
    config = bench.workload_config(arm, precision, prompts, group, new_tokens, sets, family)
    spec = build_run_spec(config)
    train = load_split(spec.task, "train", spec.data_dir)
    prompt_len = max_prompt_len(spec.tokenizer, spec.task)
    tokens, mask = encode_prompts(spec.tokenizer, train[:prompts], prompt_len)
    return Workload(spec, starting_params(spec), tokens, mask, group, new_tokens)


def sampler_call(w: Workload, sampler_module: Any, recipe: Any, **kw: Any) -> Callable:
    """seed -> (tokens, rollout log-probs) on the host, of one rollout call."""

    def call(seed: int) -> Any:
        args = (w.params, w.spec.model, recipe, w.tokens, w.mask, jax.random.key(seed))
        out = sampler_module.sample(*args, **w.sample_kwargs(), **kw)
        return jax.tree.map(np.asarray, (out.tokens, out.rollout_logp))

    return call


def minibatch(w: Workload) -> tuple[dict[str, jax.Array], jax.Array]:
    """(a minibatch of a quarter of the groups of a batch drawn by this checkout's sampler with
    key 0, a fixed cotangent of its log-probs on its response tokens)."""
    args = (w.params, w.spec.model, w.spec.rollout_recipe, w.tokens, w.mask, jax.random.key(0))
    out = checkout_sampler.sample(*args, **w.sample_kwargs())
    rows = slice(0, len(w.tokens) * w.group // 4)
    keys = ("tokens", "positions", "attn_mask", "response_mask")
    batch = {k: jnp.asarray(getattr(out, k)[rows]) for k in keys}
    cot = jax.random.normal(jax.random.key(1), batch["tokens"].shape) * batch["response_mask"]
    return batch, cot


def logprob_program(
    w: Workload,
    phase: str,
    forward_module: Any,
    recipe: Any,
    groups_cls: Any,
    batch: dict[str, jax.Array],
    cot: jax.Array,
) -> Callable:
    """The jitted `forward` (params -> log-probs) or `update` (params -> their gradient)."""
    run = w.spec.config
    groups = groups_cls(w.group, w.new_tokens) if run.train.share_prompt else None

    def logp(p: Any) -> jax.Array:
        return forward_module.batch_logprobs(
            w.spec.model, recipe, p, {}, batch, chunk=run.train.logprob_chunk, shared_prompt=groups
        )[0]

    if phase == "forward":
        return jax.jit(logp)
    return jax.jit(jax.grad(lambda p: jnp.sum(logp(p) * cot)))


def update_step_call(
    w: Workload, package: str, batch: dict[str, jax.Array], config: Any
) -> Callable[[int], Any]:
    """i -> the params (on the host) after one more update step of the trainer of `package`
    (`calclip_jax` or another revision's copy; its own `build_run_spec` of `config`, the run's
    ConfigDict) on `batch` (`minibatch`'s rows): the old log-probs come from the trainer's
    `prepare` at its first state, the flags say neither a new batch nor a calibration."""
    build = importlib.import_module(f"{package}.config").build_run_spec
    trainer_module = importlib.import_module(f"{package}.train.trainer")
    flags = importlib.import_module(f"{package}.train.update_step").update_flags
    trainer = trainer_module.run_trainer(build(config), jax.tree.map(jnp.copy, w.params))
    rows = len(batch["tokens"])
    rollout = {k: np.asarray(v) for k, v in batch.items()}
    rollout["rollout_logp"] = np.zeros(batch["tokens"].shape, np.float32)
    rollout["advantages"] = np.random.default_rng(2).standard_normal(rows).astype(np.float32)
    (mb,) = trainer.updater.prepare(trainer.state, rollout, [np.arange(rows)], calibrate=False)
    state = trainer.state

    def call(i: int) -> Any:
        nonlocal state
        del i
        state, _ = trainer.update_step(state, mb, flags(new_batch=False, calibrate=False))
        return jax.block_until_ready(state.params)

    return call
