"""One rollout batch -> several minibatch updates (PPO epochs x minibatches).

Old log-probs are computed under the batch composition the update sees: per planned minibatch,
from the parameters and FP8 state the batch started with (theta_old), in the trainer precision.
Per-tensor current scaling makes a token's log-prob depend on its batch-mates; computing old
log-probs on the whole batch and updating on minibatches would start the ratio away from 1.
The first update of a batch uses its own forward as the old log-probs
(`train/update_step.py`), so the ratio is exactly 1 there, and its precomputed old log-probs
are needed only for the `old_logp_recompute_gap` check: they are computed at ratio-dump steps
(`update(probe=True)`) and skipped otherwise. The composition effect itself
(whole-batch vs minibatch old log-probs) is measured at ratio-dump steps (`composition_*`
metrics, `ratio_probe`).

Calibration: RL steps 1, 1 + period, 1 + 2 period, ... calibrate; their minibatches also carry the
old policy's BF16-shadow log-probs (`old_logp_ref`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from calclip_jax.config.spec import UpdateConfig
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model import ModelConfig
from calclip_jax.model.shared_prompt import PromptGroups, check_prompt_groups
from calclip_jax.parallel.multihost import to_host, tree_to_host
from calclip_jax.rl.calibration import calibrating_rl_step
from calclip_jax.train.forward import FORWARD_KEYS, batch_logprobs
from calclip_jax.train.forward_program import SHADOW_KEY, make_forward_program, program_keys
from calclip_jax.train.micro_batches import map_micro
from calclip_jax.train.state import TrainState
from calclip_jax.train.update_step import update_flags

ROLLOUT_KEYS = ("tokens", "positions", "attn_mask", "response_mask", "advantages", "rollout_logp")
PLAN_STREAM = 1_000_003  # the minibatch order of RL step s draws from [seed, s, PLAN_STREAM]


def plan_rng(seed: int, rl_step: int) -> np.random.Generator:
    """The generator of RL step `rl_step`'s minibatch plan (`PPOUpdater.plan`) in run `seed`."""
    return np.random.default_rng([seed, rl_step, PLAN_STREAM])


def minibatch_keys(cfg: UpdateConfig) -> tuple[str, ...]:
    """Keys of the minibatches `PPOUpdater.prepare` makes (what the update step is jitted for)."""
    keys = (*ROLLOUT_KEYS, "old_logp")
    if cfg.calibration.enabled:
        keys += ("old_logp_ref",)
    return keys + (("ref_logp",) if cfg.rl.kl_beta > 0 else ()) + program_keys(cfg)


def make_logprob_fn(
    model_config: ModelConfig,
    recipe: PrecisionRecipe,
    temperature: float = 1.0,
    chunk: int | None = None,
    shared_prompt: PromptGroups | None = None,
) -> Callable:
    """Jitted (params, fp8_meta, batch) -> logp_BT under `recipe`, no gradient, no state update;
    `chunk` and `shared_prompt` as in `batch_logprobs` (the update step's, so old log-probs are
    the same program)."""

    @jax.jit
    def logprobs(params: Any, fp8_meta: Any, batch: dict[str, jax.Array]) -> jax.Array:
        logp_BT, _, _ = batch_logprobs(
            model_config,
            recipe,
            params,
            fp8_meta,
            batch,
            temperature=temperature,
            chunk=chunk,
            shared_prompt=shared_prompt,
        )
        return logp_BT

    return logprobs


def make_minibatch_forwards(model_config: ModelConfig, cfg: UpdateConfig) -> Callable:
    """Jitted (params, fp8_meta, ref_params, minibatch, wants) -> {name: logp_BT} for the names
    in the static `wants`: "old_logp" (trainer recipe at theta_old), "old_logp_ref" (shadow
    recipe at theta_old), "ref_logp" (trainer recipe at the KL reference `ref_params`). The
    forwards a minibatch needs before its update in one program, each the same computation as
    `make_logprob_fn`'s (a test checks them bitwise), run over the update's micro-batches
    (`train.micro_batches`), so old log-probs share the update's batch composition."""
    temp, chunk, shared = cfg.temperature, cfg.logprob_chunk, cfg.shared_prompt
    group = 1 if shared is None else shared.group_size

    @functools.partial(jax.jit, static_argnames="wants")
    def forwards(
        params: Any, fp8_meta: Any, ref_params: Any, mb: dict[str, Any], wants: tuple[str, ...]
    ) -> dict[str, jax.Array]:
        inputs = {k: mb[k] for k in FORWARD_KEYS}
        runs = {
            "old_logp": (cfg.recipe, params, fp8_meta),
            "old_logp_ref": (cfg.shadow_recipe, params, {}),
            "ref_logp": (cfg.recipe, ref_params, fp8_meta),
        }
        out = {}
        for name in wants:
            recipe, p, meta = runs[name]
            forward = lambda rows, recipe=recipe, p=p, meta=meta: batch_logprobs(
                model_config,
                recipe,
                p,
                meta,
                rows,
                temperature=temp,
                chunk=chunk,
                shared_prompt=shared,
            )[0]
            out[name] = map_micro(forward, inputs, cfg.micro_batches, group)
        return out

    return lambda params, fp8_meta, ref_params, mb, wants: (
        forwards(params, fp8_meta, ref_params, mb, wants=wants) if wants else {}
    )


def composition_metrics(
    full_BT: np.ndarray,
    minibatch_BT: np.ndarray,
    advantages: np.ndarray,
    mask_BT: np.ndarray,
    bounds: tuple[float, float],
) -> dict[str, float]:
    """The batch-composition effect at theta_old: `full_BT` old log-probs computed on the whole
    batch, `minibatch_BT` on the minibatches the updates see (same parameters, same precision).
    std / max of their difference over valid tokens, and the share of A<0 (A>0) tokens whose
    ratio exp(minibatch - full) would already be clipped at `bounds` at the first update."""
    valid = mask_BT.astype(bool)
    gap = (minibatch_BT - full_BT)[valid].astype(np.float64)
    adv = np.broadcast_to(advantages.reshape(len(mask_BT), -1), mask_BT.shape)[valid]
    ratio = np.exp(gap)
    share = lambda hit, sel: float(np.sum(hit & sel) / max(np.sum(sel), 1))
    return {
        "composition_logp_std": float(np.std(gap)) if gap.size else 0.0,
        "composition_logp_max": float(np.max(np.abs(gap))) if gap.size else 0.0,
        "composition_clip_lower_neg": share(ratio < bounds[0], adv < 0),
        "composition_clip_upper_pos": share(ratio > bounds[1], adv > 0),
    }


@dataclasses.dataclass
class PPOUpdater:
    """Runs `epochs x num_minibatches` jitted updates on one rollout batch."""

    model_config: ModelConfig
    update_config: UpdateConfig
    update_step: Callable[[TrainState, dict, dict], tuple[TrainState, dict]]
    epochs: int = 1
    num_minibatches: int = 4
    ref_params: Any = None  # frozen reference policy for the KL term (needed when kl_beta > 0)

    def __post_init__(self) -> None:
        cfg = self.update_config
        mc, temp, chunk = self.model_config, cfg.temperature, cfg.logprob_chunk
        shared = cfg.shared_prompt
        self._logp = make_logprob_fn(mc, cfg.recipe, temp, chunk, shared)
        self._shadow_logp = make_logprob_fn(mc, cfg.shadow_recipe, temp, chunk, shared)
        self._forwards = make_minibatch_forwards(mc, cfg)
        self._program = make_forward_program(mc, cfg) if cfg.same_forward else None

    def calibrates(self, rl_step: int) -> bool:
        """Whether RL step `rl_step` (1-based) calibrates (`calibrating_rl_step`)."""
        calib = self.update_config.calibration
        return calib.enabled and calibrating_rl_step(rl_step, calib.period)

    def plan(self, n: int, rng: np.random.Generator) -> list[np.ndarray]:
        """Row indices of every update of the batch: per epoch a permutation, split in order.
        With `shared_prompt`, a permutation of whole groups (each group's rows in order)."""
        groups = self.update_config.shared_prompt
        g = 1 if groups is None else groups.group_size
        if n % (self.num_minibatches * g):
            raise ValueError(
                f"rollout batch {n} not divisible into {self.num_minibatches} minibatches"
                + ("" if g == 1 else f" of whole groups of {g}")
            )
        size = n // self.num_minibatches
        plan = []
        for _ in range(self.epochs):
            order = rng.permutation(n // g)
            if g > 1:
                order = (order[:, None] * g + np.arange(g)).reshape(-1)
            plan += [order[i * size : (i + 1) * size] for i in range(self.num_minibatches)]
        return plan

    def prepare(
        self,
        state: TrainState,
        rollout: dict[str, Any],
        plan: list[np.ndarray],
        calibrate: bool,
        first_old: bool = True,
    ) -> list[dict[str, Any]]:
        """The minibatches of `plan`, each with old_logp (and old_logp_ref / ref_logp when the
        step needs them) computed on that minibatch from `state` (theta_old), all of one
        minibatch's forwards in one jitted call, kept on the device with one process.

        The first update of a batch takes its own forward as the old log-probs, and its
        theta == theta_old shadow ratios are never a calibration sample, so its old_logp and
        old_logp_ref only feed the `old_logp_recompute_gap` check: `first_old=False` skips
        those two forwards and gives NaN old_logp (the gap is then NaN) and zero old_logp_ref.
        With `same_forward` the forward program gives the old log-probs of every minibatch, and
        the first minibatch keeps all its outputs: its update runs at theta_old on them.
        """
        missing = [k for k in ROLLOUT_KEYS if k not in rollout]
        if missing:
            raise KeyError(f"rollout batch lacks {missing}")
        batch = {k: np.asarray(v) for k, v in rollout.items()}
        if self.update_config.shared_prompt is not None:
            check_prompt_groups(batch, self.update_config.shared_prompt)
        kl = self.update_config.rl.kl_beta > 0
        if kl and self.ref_params is None and "ref_logp" not in batch:
            raise ValueError("kl_beta > 0 needs PPOUpdater.ref_params or rollout['ref_logp']")
        calib = self.update_config.calibration.enabled
        keep = (lambda x: x) if jax.process_count() == 1 else to_host
        minibatches = []
        for i, idx in enumerate(plan):
            mb: dict[str, Any] = {k: v[idx] for k, v in batch.items()}
            old = first_old or i > 0
            if self._program is not None:  # the forward program at theta_old (always needed)
                out = self._program_outputs(state, mb, calibrate)
                mb["old_logp"] = out["logp"]
                if calib:
                    mb["old_logp_ref"] = out[SHADOW_KEY]
                if i == 0:  # the batch's first update runs at theta_old: these are its inputs
                    mb.update(out)
                old = False
            wants = ("old_logp",) * old + ("old_logp_ref",) * (calib and calibrate and old)
            wants += ("ref_logp",) * (kl and "ref_logp" not in mb)
            got = self._forwards(state.params, state.fp8_meta, self.ref_params, mb, wants)
            mb.update({k: keep(v) for k, v in got.items()})
            shape = mb["response_mask"].shape
            mb.setdefault("old_logp", np.full(shape, np.nan, np.float32))
            if calib:
                mb.setdefault("old_logp_ref", np.zeros(shape, np.float32))
            minibatches.append(mb)
        return minibatches

    def _program_outputs(
        self, state: TrainState, mb: dict[str, Any], calibrate: bool
    ) -> dict[str, Any]:
        """The forward program on `mb` at `state`: logp, entropy and, with calibration on,
        shadow_logp (the update's inputs; at theta_old also the old log-probs). One program per
        RL step: the shadow rides along on calibrating steps, zeros stand in for it otherwise."""
        calib = self.update_config.calibration.enabled
        rows = {k: mb[k] for k in FORWARD_KEYS}
        out = self._program(state.params, state.fp8_meta, rows, shadow=calib and calibrate)
        if calib and SHADOW_KEY not in out:
            out[SHADOW_KEY] = jnp.zeros_like(out["logp"])
        return out

    def ratio_probe(
        self,
        old_params: Any,
        old_meta: Any,
        after: TrainState,
        batch: dict[str, np.ndarray],
    ) -> dict[str, np.ndarray]:
        """Ratios of the whole rollout batch after all its updates, in the trainer precision and
        in the BF16 shadow (each against the old policy in the same precision, all on the whole
        batch), with advantages, response mask and old token probabilities: the raw material of
        ratio histograms. `old_logp_full`: the trainer's old log-probs on the whole batch."""
        mask = batch["response_mask"].astype(bool)
        old = to_host(self._logp(old_params, old_meta, batch))
        old_ref = to_host(self._shadow_logp(old_params, {}, batch))
        new = to_host(self._logp(after.params, after.fp8_meta, batch))
        new_ref = to_host(self._shadow_logp(after.params, {}, batch))
        ratio = lambda a, b: np.where(mask, np.exp(np.where(mask, a - b, 0.0)), 1.0)
        return {
            "ratio": ratio(new, old).astype(np.float32),
            "ratio_ref": ratio(new_ref, old_ref).astype(np.float32),
            "advantages": batch["advantages"],
            "mask": mask,
            "old_prob": np.exp(old).astype(np.float32),
            "old_logp_full": old.astype(np.float32),
        }

    def update(
        self,
        state: TrainState,
        rollout: dict[str, Any],
        rng: np.random.Generator,
        rl_step: int,
        probe: bool = False,
    ) -> tuple[TrainState, list[dict[str, float]], dict[str, np.ndarray] | None]:
        """Returns the new state, one metrics dict (host floats) per update, and with `probe`
        the `ratio_probe` arrays of this rollout batch (else None). With `probe` the first
        update's metrics also carry the `composition_metrics`."""
        rollout = {k: np.asarray(v) for k, v in rollout.items()}
        n = rollout["tokens"].shape[0]
        plan = self.plan(n, rng)
        calibrate = self.calibrates(rl_step)
        minibatches = self.prepare(state, rollout, plan, calibrate, first_old=probe)
        old = jax.tree.map(jnp.copy, (state.params, state.fp8_meta)) if probe else None
        device_metrics = []
        for i, mb in enumerate(minibatches):
            if self._program is not None and i > 0:  # the first has them from `prepare`
                mb = {**mb, **self._program_outputs(state, mb, calibrate)}
            state, metrics = self.update_step(state, mb, update_flags(i == 0, calibrate))
            device_metrics.append(metrics)
        host = [
            {k: float(jnp.asarray(v)) for k, v in m.items()} for m in tree_to_host(device_metrics)
        ]
        if not probe:
            return state, host, None
        probed = self.ratio_probe(*old, state, rollout)
        first_epoch_BT = np.zeros_like(probed["old_logp_full"])
        for idx, mb in zip(plan[: self.num_minibatches], minibatches, strict=False):
            first_epoch_BT[idx] = np.asarray(mb["old_logp"])
        probed["old_logp_minibatch"] = first_epoch_BT
        rl = self.update_config.rl
        host[0].update(
            composition_metrics(
                probed["old_logp_full"],
                first_epoch_BT,
                rollout["advantages"],
                rollout["response_mask"],
                rl.clip_bounds,
            )
        )
        return state, host, probed
