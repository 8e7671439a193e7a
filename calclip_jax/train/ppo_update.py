"""One rollout batch -> several minibatch train steps (PPO epochs x minibatches).

The trainer recomputes the old policy's log-probs once per rollout batch (its own precision,
so the ratio starts at exactly 1), plus its BF16-shadow log-probs when a calibration step
falls inside this batch's updates.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from calclip_jax.fp8 import PrecisionPolicy
from calclip_jax.model import ModelConfig
from calclip_jax.train.config import StepConfig
from calclip_jax.train.forward import batch_logprobs
from calclip_jax.train.multihost import to_host, tree_to_host
from calclip_jax.train.state import TrainState

ROLLOUT_KEYS = ("tokens", "positions", "attn_mask", "response_mask", "advantages", "rollout_logp")


def make_logprob_fn(model_config: ModelConfig, policy: PrecisionPolicy) -> Callable:
    """Jitted (params, fp8_meta, batch) -> logp_BT under `policy`, no gradient, no state update."""

    @jax.jit
    def logprobs(params: Any, fp8_meta: Any, batch: dict[str, jax.Array]) -> jax.Array:
        logp_BT, _, _ = batch_logprobs(model_config, policy, params, fp8_meta, batch)
        return logp_BT

    return logprobs


@dataclasses.dataclass
class PPOUpdater:
    """Runs `epochs x num_minibatches` jitted train steps on one rollout batch."""

    model_config: ModelConfig
    step_config: StepConfig
    train_step: Callable[[TrainState, dict], tuple[TrainState, dict]]
    epochs: int = 1
    num_minibatches: int = 4
    ref_params: Any = None  # frozen reference policy for the KL term (needed when kl_beta > 0)

    def __post_init__(self) -> None:
        self._old_logp = make_logprob_fn(self.model_config, self.step_config.policy)
        calib = self.step_config.calibration
        self._shadow_logp = (
            make_logprob_fn(self.model_config, self.step_config.shadow_policy)
            if calib.enabled
            else None
        )
        self._probe_shadow_logp: Callable | None = None

    def steps_per_batch(self) -> int:
        return self.epochs * self.num_minibatches

    def batch_keys(self) -> tuple[str, ...]:
        """Keys of the minibatches `prepare` makes (what the jitted step is sharded for)."""
        keys = (*ROLLOUT_KEYS, "old_logp")
        if self._shadow_logp is not None:
            keys += ("old_logp_ref",)
        return keys + (("ref_logp",) if self.step_config.rl.kl_beta > 0 else ())

    def _needs_shadow(self, first_step: int) -> bool:
        calib = self.step_config.calibration
        if not calib.enabled:
            return False
        return any((first_step + i) % calib.period == 0 for i in range(self.steps_per_batch()))

    def prepare(self, state: TrainState, rollout: dict[str, Any]) -> dict[str, np.ndarray]:
        """Adds old_logp, and old_logp_ref (calibration) / ref_logp (KL) when needed."""
        missing = [k for k in ROLLOUT_KEYS if k not in rollout]
        if missing:
            raise KeyError(f"rollout batch lacks {missing}")
        batch = {k: np.asarray(v) for k, v in rollout.items()}
        batch["old_logp"] = to_host(self._old_logp(state.params, state.fp8_meta, batch))
        if self._shadow_logp is not None:
            if self._needs_shadow(int(state.step)):
                batch["old_logp_ref"] = to_host(self._shadow_logp(state.params, {}, batch))
            else:
                batch["old_logp_ref"] = np.zeros_like(batch["old_logp"])
        if self.step_config.rl.kl_beta > 0 and "ref_logp" not in batch:
            if self.ref_params is None:
                raise ValueError("kl_beta > 0 needs PPOUpdater.ref_params or rollout['ref_logp']")
            batch["ref_logp"] = to_host(self._old_logp(self.ref_params, state.fp8_meta, batch))
        return batch

    def _shadow(self) -> Callable:
        """The shadow log-prob fn for ratio probes; built on first use without calibration, and
        kept apart from `_shadow_logp`, which decides the batch keys the step is compiled for."""
        if self._shadow_logp is not None:
            return self._shadow_logp
        if self._probe_shadow_logp is None:
            self._probe_shadow_logp = make_logprob_fn(
                self.model_config, self.step_config.shadow_policy
            )
        return self._probe_shadow_logp

    def ratio_probe(
        self, old_params: Any, after: TrainState, batch: dict[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        """Ratios of the whole rollout batch after all its updates, in the trainer precision and
        in the BF16 shadow (each against the old policy in the same precision), with advantages,
        response mask and old token probabilities: the raw material of ratio histograms."""
        shadow = self._shadow()
        mask = batch["response_mask"].astype(bool)
        old_ref = to_host(shadow(old_params, {}, batch))
        new = to_host(self._old_logp(after.params, after.fp8_meta, batch))
        new_ref = to_host(shadow(after.params, {}, batch))
        ratio = lambda a, b: np.where(mask, np.exp(np.where(mask, a - b, 0.0)), 1.0)
        return {
            "ratio": ratio(new, batch["old_logp"]).astype(np.float32),
            "ratio_ref": ratio(new_ref, old_ref).astype(np.float32),
            "advantages": batch["advantages"],
            "mask": mask,
            "old_prob": np.exp(batch["old_logp"]).astype(np.float32),
        }

    def update(
        self,
        state: TrainState,
        rollout: dict[str, Any],
        rng: np.random.Generator,
        probe: bool = False,
    ) -> tuple[TrainState, list[dict[str, float]], dict[str, np.ndarray] | None]:
        """Returns the new state, one metrics dict (host floats) per train step, and with
        `probe` the `ratio_probe` arrays of this rollout batch (else None)."""
        old_params = jax.tree.map(jnp.copy, state.params) if probe else None  # donated below
        batch = self.prepare(state, rollout)
        n = batch["tokens"].shape[0]
        if n % self.num_minibatches:
            raise ValueError(
                f"rollout batch {n} not divisible into {self.num_minibatches} minibatches"
            )
        size = n // self.num_minibatches
        device_metrics = []
        for _ in range(self.epochs):
            order = rng.permutation(n)
            for i in range(self.num_minibatches):
                idx = order[i * size : (i + 1) * size]
                state, metrics = self.train_step(state, {k: v[idx] for k, v in batch.items()})
                device_metrics.append(metrics)
        host = tree_to_host(device_metrics)
        probed = self.ratio_probe(old_params, state, batch) if probe else None
        return state, [{k: float(jnp.asarray(v)) for k, v in m.items()} for m in host], probed
