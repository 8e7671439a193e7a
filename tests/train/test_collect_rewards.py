"""collect() with `task.reward`: advantages from the mixed reward, each component and the failure
count in the metrics, a failing function zeroed, not poisoning. The sampler is a scripted fake."""

from __future__ import annotations

import types

import numpy as np

from calclip_jax.config import RolloutConfig
from calclip_jax.data import Example, get_task
from calclip_jax.data.rewards import RewardMix
from calclip_jax.rl.advantages import grpo_advantages
from calclip_jax.rl.presets import get_preset
from calclip_jax.train import collect as collect_mod
from calclip_jax.train.collect import Collector

G, B, L = 4, 2, 3
TEXTS = ["The sum is 3", "3", "4", "oops", "3", "It is 3", "six", "3"]  # to "1+2="


def raises_on_oops(responses, answers, **context):
    if "oops" in responses:
        raise ValueError("unreadable")
    return [0.5] * len(responses)


def _fake_generate(params, model, recipe, tokenizer, examples, prompt_len, key, **kw):
    n = len(examples) * kw["num_samples"]
    ones = np.ones((n, L), np.int32)
    return types.SimpleNamespace(
        tokens=ones, positions=ones, attn_mask=ones, response_mask=ones,
        rollout_logp=np.zeros((n, L), np.float32), response_len=np.full(n, 2, np.int32),
    )  # fmt: skip


def test_collect_uses_the_mix_and_logs_its_components(monkeypatch):
    monkeypatch.setattr(collect_mod, "generate", _fake_generate)
    monkeypatch.setattr(collect_mod, "decode_responses", lambda tok, out, p: (TEXTS, [True] * 8))
    rows = [Example("1+2=", "3", (1, 2), 3)]
    mix = RewardMix.load("0.5*last_integer + test_collect_rewards:raises_on_oops")
    c = Collector(
        model=None, recipe=None, task=get_task("chat_arithmetic", num_train=5, num_test=2),
        tokenizer=None, train=rows, prompt_len=2,
        cfg=RolloutConfig(prompts_per_step=B, samples_per_prompt=G), rl=get_preset("grpo"),
        seed=0, reward=mix,
    )  # fmt: skip
    out = c.collect(params=None, fp8_meta=None, step=0)
    last_integer = np.float32([1, 1, 0, 0, 1, 1, 0, 1])
    user = np.float32([0.5, 0.5, 0.5, 0, 0.5, 0.5, 0.5, 0.5])  # "oops" raised: 0 on that row
    reward = 0.5 * last_integer + user
    want = np.asarray(grpo_advantages(reward, G))
    np.testing.assert_allclose(out.batch["advantages"], want, rtol=1e-6)
    assert out.metrics["reward_mean"] == float(np.mean(reward))
    assert out.metrics["reward_last_integer_mean"] == float(np.mean(last_integer))
    assert out.metrics["reward_raises_on_oops_mean"] == float(np.mean(user))
    assert out.metrics["reward_errors"] == 1.0
    assert out.metrics["correct_frac"] == 5 / 8  # the task's verifier, not the mix
    assert [s[2] for s in out.samples] == reward.tolist()
