"""collect(): DAPO dynamic sampling filters groups on correctness, advantages use shaped rewards.

The sampler and the verifier are replaced by scripted fakes (no model runs).
"""

from __future__ import annotations

import types

import numpy as np

from calclip_jax.config import RolloutConfig
from calclip_jax.rl.advantages import grpo_advantages
from calclip_jax.rl.presets import get_preset
from calclip_jax.train import collect as collect_mod
from calclip_jax.train.collect import Collector

G, B, L = 4, 3, 5
F, T_ = False, True
# Per round: (reward, correct) for B groups of G samples.
ROUNDS = [
    (
        [[0.5, 0.2, 0.0, 0.3], [1.0, 0.0, 0.0, 0.0], [1.1, 1.0, 1.0, 1.0]],
        [[F, F, F, F], [T_, F, F, F], [T_, T_, T_, T_]],
    ),  # partial credit, none correct: drop | 1 of G correct: keep | all correct: drop
    (
        [[1.0, 1.0, 0.0, 0.0], [0.0] * 4, [0.1, 0.0, 0.0, 0.0]],
        [[T_, T_, F, F], [F] * 4, [F] * 4],
    ),  # keep | drop | drop
]


class _Task:
    def __init__(self):
        self.calls = 0

    def verify_batch(self, rows, texts, finished):
        reward, correct = ROUNDS[self.calls]
        self.calls += 1
        return {
            "reward": np.asarray(reward, np.float32).ravel(),
            "correct": np.asarray(correct, bool).ravel(),
            "garbled": np.zeros(B * G, bool),
        }

    def response_metrics(self, rows, texts):
        return {}  # as `Task`'s default: no task-specific shares


def _fake_generate(params, model, recipe, tokenizer, examples, prompt_len, key, **kw):
    n = len(examples) * kw["num_samples"]
    r = _fake_generate.calls
    _fake_generate.calls += 1
    tokens = np.zeros((n, L), np.int32)
    tokens[:, 0] = 100 * r + np.arange(n)  # (round, row) tag
    ones = np.ones((n, L), np.int32)
    return types.SimpleNamespace(
        tokens=tokens, positions=ones, attn_mask=ones, response_mask=ones,
        rollout_logp=np.zeros((n, L), np.float32), response_len=np.full(n, 2, np.int32),
    )  # fmt: skip


def test_dynamic_sampling_uses_correctness(monkeypatch):
    _fake_generate.calls = 0
    monkeypatch.setattr(collect_mod, "generate", _fake_generate)
    decoded = (["x"] * B * G, np.ones(B * G, bool))
    monkeypatch.setattr(collect_mod, "decode_responses", lambda tok, out, p: decoded)
    c = Collector(
        model=None, recipe=None, task=_Task(), tokenizer=None,
        train=[types.SimpleNamespace(prompt="p")], prompt_len=2,
        cfg=RolloutConfig(prompts_per_step=B, samples_per_prompt=G, max_refill_rounds=1),
        rl=get_preset("dapo"), seed=0,
    )  # fmt: skip
    out = c.collect(params=None, fp8_meta=None, step=0)
    assert out.metrics["rollout_rounds"] == 2.0
    # informative groups first (round 0 group 1, round 1 group 0), then a dropped one as filler
    tags = out.batch["tokens"][::G, 0]
    np.testing.assert_array_equal(tags, [4, 100, 0])
    assert out.metrics["dyn_fill_frac"] == 1.0 / 3.0
    # advantages come from the shaped rewards; the filler group (partial credit that differs,
    # nothing correct) carries none, as if DAPO had dropped it
    shaped = np.concatenate([ROUNDS[0][0][1], ROUNDS[1][0][0], ROUNDS[0][0][0]])
    want = np.array(grpo_advantages(np.asarray(shaped, np.float32), G))
    want[2 * G :] = 0.0
    assert np.any(np.asarray(grpo_advantages(np.asarray(shaped, np.float32), G))[2 * G :] != 0)
    np.testing.assert_allclose(out.batch["advantages"], want, rtol=1e-6)
