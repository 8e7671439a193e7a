"""DAPO refill in the collector: how many rounds it draws, what fills the batch, and that every
round's prompts and samples come from (seed, step, round) only. Scripted sampler and verifier."""

from __future__ import annotations

import types

import numpy as np
import pytest

from calclip_jax.config import RolloutConfig
from calclip_jax.rl.presets import get_preset
from calclip_jax.train import collect as collect_mod
from calclip_jax.train.collect import Collector

G, B, L = 2, 4, 3
MIXED, ALL_RIGHT, ALL_WRONG = [True, False], [True, True], [False, False]


class _ScriptedTask:
    """Round r's verdicts are `rounds[r]`: one [G] correctness list per group."""

    def __init__(self, rounds: list[list[list[bool]]]):
        self.rounds, self.calls = rounds, 0

    def verify_batch(self, rows, texts, finished):
        correct = np.asarray(self.rounds[self.calls], bool).ravel()
        self.calls += 1
        return {
            "reward": correct.astype(np.float32),
            "correct": correct,
            "garbled": np.zeros_like(correct),
        }

    def response_metrics(self, rows, texts):
        return {}  # as `Task`'s default: no task-specific shares


def _fake_generate(params, model, recipe, tokenizer, examples, prompt_len, key, **kw):
    """Tokens tag (prompt id, sample index) and carry a draw from `key` (the round's key)."""
    n = len(examples) * kw["num_samples"]
    tokens = np.zeros((n, L), np.int32)
    tokens[:, 0] = np.repeat([ex.prompt for ex in examples], kw["num_samples"])
    tokens[:, 1] = np.asarray(jax_bits(key, n))
    ones = np.ones((n, L), np.int32)
    return types.SimpleNamespace(
        tokens=tokens, positions=ones, attn_mask=ones, response_mask=ones,
        rollout_logp=np.zeros((n, L), np.float32), response_len=np.full(n, 2, np.int32),
    )  # fmt: skip


def jax_bits(key, n: int) -> np.ndarray:
    import jax

    return np.asarray(jax.random.randint(key, (n,), 0, 1 << 20))


def _collector(monkeypatch, rounds, preset="dapo", max_refill_rounds=3, seed=0) -> Collector:
    monkeypatch.setattr(collect_mod, "generate", _fake_generate)
    monkeypatch.setattr(
        collect_mod, "decode_responses", lambda tok, out, p: (["x"] * len(out.tokens), [True])
    )
    cfg = RolloutConfig(
        prompts_per_step=B, samples_per_prompt=G, max_refill_rounds=max_refill_rounds
    )
    train = [types.SimpleNamespace(prompt=i) for i in range(1000)]
    return Collector(
        model=None, recipe=None, task=_ScriptedTask(rounds), tokenizer=None, train=train,
        prompt_len=2, cfg=cfg, rl=get_preset(preset), seed=seed,
    )  # fmt: skip


def test_no_refill_when_the_first_round_is_informative(monkeypatch):
    out = _collector(monkeypatch, [[MIXED] * B]).collect(None, None, step=1)
    assert out.metrics["rollout_rounds"] == 1.0 and out.metrics["dyn_fill_frac"] == 0.0
    assert np.all(out.batch["advantages"] != 0)


def test_refill_stops_once_the_batch_is_full(monkeypatch):
    rounds = [
        [MIXED, ALL_RIGHT, ALL_WRONG, ALL_WRONG],  # 1 informative group
        [ALL_RIGHT, MIXED, MIXED, ALL_WRONG],  # 3 in total
        [MIXED, MIXED, ALL_RIGHT, MIXED],  # 6 >= B: stop here
        [MIXED] * B,  # never drawn
    ]
    c = _collector(monkeypatch, rounds)
    out = c.collect(None, None, step=1)
    assert out.metrics["rollout_rounds"] == 3.0 and c.task.calls == 3
    assert out.metrics["dyn_fill_frac"] == 0.0
    # informative groups in draw order: round 0 group 0, round 1 groups 1-2, round 2 group 0
    tags = out.batch["tokens"][::G, 0]
    drawn = [_prompts(c, 1, r) for r in range(3)]
    np.testing.assert_array_equal(tags, [drawn[0][0], drawn[1][1], drawn[1][2], drawn[2][0]])
    assert np.all(out.batch["advantages"] != 0)
    # metrics of the first round only (what the policy scores before any filtering)
    assert out.metrics["correct_frac"] == pytest.approx(np.mean(rounds[0]))
    assert out.metrics["all_rounds_reward_mean"] == pytest.approx(np.mean(rounds[:3]))


def test_refill_is_bounded_and_fills_with_zero_advantage_groups(monkeypatch):
    rounds = [[MIXED, ALL_RIGHT, ALL_WRONG, ALL_WRONG]] + [[ALL_WRONG] * B] * 5
    c = _collector(monkeypatch, rounds, max_refill_rounds=2)
    out = c.collect(None, None, step=1)
    assert out.metrics["rollout_rounds"] == 3.0 and c.task.calls == 3  # 1 + max_refill_rounds
    assert out.metrics["dyn_fill_frac"] == 3 / B
    adv = out.batch["advantages"].reshape(B, G)
    assert np.all(adv[0] != 0) and np.all(adv[1:] == 0)
    assert out.batch["tokens"].shape == (B * G, L)


def test_grpo_never_refills(monkeypatch):
    c = _collector(monkeypatch, [[ALL_WRONG] * B, [MIXED] * B], preset="grpo")
    out = c.collect(None, None, step=1)
    assert out.metrics["rollout_rounds"] == 1.0 and out.metrics["dyn_fill_frac"] == 0.0


def _prompts(c: Collector, step: int, round_: int) -> np.ndarray:
    rng = np.random.default_rng([c.seed, step, round_])
    return rng.integers(0, len(c.train), size=B)


def test_rounds_depend_on_seed_step_and_round_only(monkeypatch):
    """A resumed run redraws the same batch: prompts and sampler keys per (seed, step, round)."""
    rounds = [[ALL_WRONG] * B, [MIXED] * B]
    first = _collector(monkeypatch, rounds).collect(None, None, step=5)
    again = _collector(monkeypatch, rounds).collect(None, None, step=5)
    np.testing.assert_array_equal(first.batch["tokens"], again.batch["tokens"])
    other = _collector(monkeypatch, rounds).collect(None, None, step=6)
    assert not np.array_equal(first.batch["tokens"], other.batch["tokens"])
    np.testing.assert_array_equal(first.batch["tokens"][::G, 0], _prompts(_collector(
        monkeypatch, rounds), 5, 1))  # fmt: skip
