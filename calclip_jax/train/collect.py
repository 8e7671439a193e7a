"""Stage 2, first half: rollout -> rewards -> advantages, with DAPO dynamic sampling + refill.

Randomness is derived from (seed, step, round) only, so a resumed run draws the same prompts
and samples as an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from calclip_jax.config import RunSpec
from calclip_jax.config.schema import RolloutConfig
from calclip_jax.data import Example, Task, Tokenizer
from calclip_jax.data.rewards import RewardMix, reward_metrics, score_batch
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model import ModelConfig
from calclip_jax.rl.advantages import dynamic_sampling_keep, grpo_advantages, overlong_penalty
from calclip_jax.rl.presets import RLPreset
from calclip_jax.rollout.generate import decode_responses, generate, max_prompt_len


@dataclasses.dataclass
class Collected:
    """A rollout batch ready for PPOUpdater plus what the logs need."""

    batch: dict[str, np.ndarray]
    metrics: dict[str, float]
    samples: list[tuple[str, str, float]]  # (prompt, response, reward) of the first rows


@dataclasses.dataclass(frozen=True)
class Collector:
    """What a rollout needs besides the parameters: model, sampler precision, task, data."""

    model: ModelConfig
    recipe: PrecisionRecipe  # the rollout (sampler) precision
    task: Task
    tokenizer: Tokenizer
    train: Sequence[Example]
    prompt_len: int
    cfg: RolloutConfig
    rl: RLPreset
    seed: int
    reward: RewardMix | None = None  # `task.reward`; None: the task verifier's reward

    def collect(self, params: Any, fp8_meta: Any, step: int) -> Collected:
        """See the module-level `collect`."""
        return collect(self, params, fp8_meta, step)


def run_collector(
    spec: RunSpec, train: Sequence[Example], recipe: PrecisionRecipe | None = None
) -> Collector:
    """The run's collector over the `train` prompts: its sampler precision (or `recipe`), task,
    tokenizer, rollout knobs, RL preset and seed."""
    run = spec.config
    return Collector(
        spec.model,
        spec.rollout_recipe if recipe is None else recipe,
        spec.task,
        spec.tokenizer,
        train,
        max_prompt_len(spec.tokenizer, spec.task),
        run.rollout,
        spec.update.rl,
        run.seed,
        spec.reward,
    )


def _round(c: Collector, params: Any, fp8_meta: Any, step: int, round_: int) -> dict[str, Any]:
    """One sampler call on prompts drawn from (seed, step, round_), verified and shaped."""
    cfg = c.cfg
    rng = np.random.default_rng([c.seed, step, round_])
    examples = [c.train[i] for i in rng.integers(0, len(c.train), size=cfg.prompts_per_step)]
    key = jax.random.fold_in(jax.random.fold_in(jax.random.key(c.seed), step), round_)
    out = generate(
        params,
        c.model,
        c.recipe,
        c.tokenizer,
        examples,
        c.prompt_len,
        key,
        num_samples=cfg.samples_per_prompt,
        max_new_tokens=cfg.max_new_tokens,
        temperature=cfg.temperature,
        top_k=cfg.top_k,
        top_p=cfg.top_p,
        fp8_meta=fp8_meta,
        sampler=cfg.sampler,
    )
    texts, finished = decode_responses(c.tokenizer, out, c.prompt_len)
    rows = [ex for ex in examples for _ in range(cfg.samples_per_prompt)]
    scores = score_batch(c.task, c.reward, rows, texts, finished)
    lengths = np.asarray(out.response_len)
    shaped = scores["reward"].astype(np.float32)
    if c.rl.overlong_shaping:
        shaped = shaped + np.asarray(
            overlong_penalty(
                lengths, max_len=c.rl.overlong_max_len, cache_len=c.rl.overlong_cache_len
            )
        )
    arrays = {
        k: np.asarray(getattr(out, k))
        for k in ("tokens", "positions", "attn_mask", "response_mask", "rollout_logp")
    }
    return {
        "arrays": arrays,
        "scores": scores,
        "shaped": shaped,
        "lengths": lengths,
        "rows": rows,
        "texts": texts,
    }


def _informative(rd: dict[str, Any], g: int) -> np.ndarray:
    """bool [groups] of one round: DAPO keeps groups with 0 < #correct < G."""
    return np.asarray(dynamic_sampling_keep(rd["scores"]["correct"], g)).reshape(-1, g)[:, 0]


def collect(c: Collector, params: Any, fp8_meta: Any, step: int) -> Collected:
    """One RL step's rollout batch of exactly prompts_per_step x samples_per_prompt rows.

    With dynamic sampling, groups whose samples are all correct or all wrong (DAPO's rule, on
    `scores["correct"]`; the shaped reward only drives advantages) are dropped and further rounds
    refill the batch (up to max_refill_rounds); if still short, dropped groups fill the rest
    with advantage 0 and `dyn_fill_frac` reports their share.
    """
    cfg, rl = c.cfg, c.rl
    g, b = cfg.samples_per_prompt, cfg.prompts_per_step
    first = _round(c, params, fp8_meta, step, 0)
    rounds = [first]
    if rl.dynamic_sampling:
        kept = int(np.sum(_informative(first, g)))
        while kept < b and len(rounds) <= cfg.max_refill_rounds:
            rounds.append(_round(c, params, fp8_meta, step, len(rounds)))
            kept += int(np.sum(_informative(rounds[-1], g)))
    groups: list[tuple[int, int, bool]] = []  # (round, group, informative)
    for r, rd in enumerate(rounds):
        groups += [(r, i, bool(k)) for i, k in enumerate(_informative(rd, g))]
    if rl.dynamic_sampling:
        groups = [x for x in groups if x[2]][:b] + [x for x in groups if not x[2]]
    groups = groups[:b]
    sel = lambda r, i: slice(i * g, (i + 1) * g)
    cat = lambda get: np.concatenate([get(rounds[r])[sel(r, i)] for r, i, _ in groups])
    batch = {k: cat(lambda rd, k=k: rd["arrays"][k]) for k in first["arrays"]}
    shaped = cat(lambda rd: rd["shaped"])
    advantages = np.asarray(
        grpo_advantages(shaped, g, normalize_std=rl.adv_normalize_std, eps=rl.adv_eps), np.float32
    )
    if rl.dynamic_sampling:  # filler groups (all correct / all wrong) carry no gradient
        informative = np.repeat([x[2] for x in groups], g)
        advantages = np.where(informative, advantages, np.float32(0.0))
    batch["advantages"] = advantages
    reward = cat(lambda rd: rd["scores"]["reward"])
    all_scores = {
        k: np.concatenate([rd["scores"][k] for rd in rounds])
        for k in ("reward", "correct", "garbled")
    }
    all_len = np.concatenate([rd["lengths"] for rd in rounds])
    metrics = {
        "reward_mean": float(np.mean(first["scores"]["reward"])),
        "correct_frac": float(np.mean(first["scores"]["correct"])),
        "garbled_frac": float(np.mean(first["scores"]["garbled"])),
        "response_len_mean": float(np.mean(first["lengths"])),
        "response_len_max": float(np.max(all_len)),
        "batch_reward_mean": float(np.mean(reward)),
        "rollout_rounds": float(len(rounds)),
        "dyn_fill_frac": float(sum(not x[2] for x in groups) / b) if rl.dynamic_sampling else 0.0,
        "all_rounds_reward_mean": float(np.mean(all_scores["reward"])),
        **reward_metrics(first["scores"], [rd["scores"] for rd in rounds]),
        **c.task.response_metrics(first["rows"], first["texts"]),
    }
    samples = [
        (first["rows"][i].prompt, first["texts"][i], float(first["scores"]["reward"][i]))
        for i in range(len(first["rows"]))
    ]
    return Collected(batch=batch, metrics=metrics, samples=samples)
