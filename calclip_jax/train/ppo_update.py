"""One rollout batch -> several minibatch updates (PPO epochs x minibatches).

Old log-probs are computed under the batch composition the update sees: per planned minibatch,
from the parameters and FP8 state the batch started with (theta_old), in the trainer precision.
Per-tensor current scaling makes a token's log-prob depend on its batch-mates; computing old
log-probs on the whole batch and updating on minibatches would start the ratio away from 1.
The first update of a batch uses its own forward as the old log-probs
(`train/update_step.py`), so the ratio is exactly 1 there, and its precomputed old log-probs
are needed only for the `old_logp_recompute_gap` check: they are computed at ratio-dump steps
(`update(probe=True)`) and skipped otherwise. The composition effect itself (whole-batch vs
minibatch old log-probs) is measured at ratio-dump steps (`composition_*` metrics,
`ratio_probe`). With frozen delayed scales (`train.delayed_scales="batch"`) every forward of the
batch scales from the amax histories as it began, primed before the run's first update
(`_prime`): no forward scales from its own amax, so delayed scaling has no composition effect.

Calibration: RL steps 1, 1 + period, 1 + 2 period, ... calibrate; their minibatches also carry the
old policy's BF16-shadow log-probs (`old_logp_ref`), as do those of the RL steps that measure the
shadow (`calibration.shadow_every`). With `calibration.sample="batch"` a calibrating RL step
calibrates once, on all its minibatches after its first applied update
(`train/pooled_calibration.py`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from calclip_jax.config.spec import UpdateConfig
from calclip_jax.model import ModelConfig
from calclip_jax.model.shared_prompt import check_prompt_groups
from calclip_jax.parallel.multihost import to_host, tree_to_host
from calclip_jax.rl.calibration import CALIB_METRICS
from calclip_jax.train.forward import FORWARD_KEYS
from calclip_jax.train.forward_program import (
    SHADOW_KEY,
    make_forward_program,
    make_shadow_program,
    program_keys,
)
from calclip_jax.train.minibatch_forwards import (  # make_logprob_fn: re-exported
    composition_metrics,
    make_logprob_fn,
    make_minibatch_forwards,
)
from calclip_jax.train.pooled_calibration import make_pooled_calibration
from calclip_jax.train.state import TrainState
from calclip_jax.train.update_step import update_flags
from calclip_jax.workdir.ratio_dumps import ROW_KEYS

__all__ = ["PPOUpdater", "histories_empty", "make_logprob_fn", "minibatch_keys", "plan_rng"]
THETA_FORWARDS = ("old_logp", "old_logp_ref")  # the trainer's and the shadow's, one program

ROLLOUT_KEYS = ("tokens", "positions", "attn_mask", "response_mask", "advantages", "rollout_logp")
PLAN_STREAM = 1_000_003  # the minibatch order of RL step s draws from [seed, s, PLAN_STREAM]


def plan_rng(seed: int, rl_step: int) -> np.random.Generator:
    """The generator of RL step `rl_step`'s minibatch plan (`PPOUpdater.plan`) in run `seed`."""
    return np.random.default_rng([seed, rl_step, PLAN_STREAM])


def histories_empty(fp8_meta: Any) -> bool:
    """Whether delayed scaling's amax histories have observed nothing yet (all zero)."""
    return not any(np.any(np.asarray(to_host(h)) != 0) for h in jax.tree.leaves(fp8_meta))


def minibatch_keys(cfg: UpdateConfig) -> tuple[str, ...]:
    """Keys of the minibatches `PPOUpdater.prepare` makes (what the update step is jitted for)."""
    keys = (*ROLLOUT_KEYS, "old_logp")
    if cfg.calibration.traces_shadow:
        keys += ("old_logp_ref",)
    return keys + (("ref_logp",) if cfg.rl.kl_beta > 0 else ()) + program_keys(cfg)


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
        traced = cfg.same_forward and cfg.calibration.traces_shadow
        self._shadow_program = make_shadow_program(mc, cfg) if traced else None
        self._pool = make_pooled_calibration(cfg, self._theta_forward)

    def calibrates(self, rl_step: int) -> bool:
        """Whether RL step `rl_step` (1-based) calibrates (`calibrating_rl_step`)."""
        return self.update_config.calibration.calibrates(rl_step)

    def _theta_forward(self, state: TrainState, mb: dict[str, Any]) -> dict[str, Any]:
        """logp and shadow_logp of `mb` at `state` by the program of its old log-probs (the pooled
        calibration's forward): the forward program, or the minibatch forwards' THETA_FORWARDS."""
        if self._program is not None:
            return self._program_outputs(state, mb, True)
        got = self._forwards(state.params, state.fp8_meta, self.ref_params, mb, THETA_FORWARDS)
        return {"logp": got["old_logp"], SHADOW_KEY: got["old_logp_ref"]}

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
        shadow: bool = False,
    ) -> list[dict[str, Any]]:
        """The minibatches of `plan`, each with old_logp (and old_logp_ref / ref_logp when the
        step needs them) computed on that minibatch from `state` (theta_old), all of one
        minibatch's forwards in one jitted call, kept on the device with one process.
        `calibrate`: the RL step calibrates; `shadow`: it measures the shadow
        (`CalibrationConfig.measures_shadow`); either needs old_logp_ref.

        The first update of a batch takes its own forward as the old log-probs, and its
        theta == theta_old shadow ratios are never a sample, so its old_logp and old_logp_ref
        only feed the `old_logp_recompute_gap` check: `first_old=False` skips those two
        forwards and gives NaN old_logp (the gap is then NaN) and zero old_logp_ref, except
        where a pooled calibration (`sample="batch"`) needs them; it computes them apart from
        ref_logp, by the program it reruns at theta_1. With `same_forward` the forward program
        gives the old log-probs of every minibatch, and the first minibatch keeps all its
        outputs: its update runs at theta_old on them; the shadow program gives old_logp_ref
        where it is read (`reads_shadow`: by a later update, or by a pooled calibration).
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
        cal = self.update_config.calibration
        traced, pooled = cal.traces_shadow, calibrate and cal.pooled
        with_ref = traced and (calibrate or shadow)
        read_later = self.reads_shadow(calibrate, shadow)  # by the updates after theta_old
        keep = (lambda x: x) if jax.process_count() == 1 else to_host
        minibatches = []
        for i, idx in enumerate(plan):
            mb: dict[str, Any] = {k: v[idx] for k, v in batch.items()}
            old = first_old or i > 0 or pooled
            if self._program is not None:  # the forward program at theta_old (always needed)
                sampled = pooled and i < self.num_minibatches  # the pooled calibration's epoch
                out = self._program_outputs(state, mb, sampled or (i > 0 and read_later))
                out = {k: keep(v) for k, v in out.items()}  # the ratio probe reads old_logp
                mb["old_logp"] = out["logp"]
                if traced:
                    mb["old_logp_ref"] = out[SHADOW_KEY]
                if i == 0:  # the batch's first update runs at theta_old: these are its inputs
                    mb.update(out)
                old = False
            wants = ("old_logp",) * old + ("old_logp_ref",) * (with_ref and old)
            ref = ("ref_logp",) * (kl and "ref_logp" not in mb)
            forwards = lambda w, mb=mb: self._forwards(
                state.params, state.fp8_meta, self.ref_params, mb, w
            )
            got = {**forwards(wants), **forwards(ref)} if pooled else forwards(wants + ref)
            mb.update({k: keep(v) for k, v in got.items()})
            shape = mb["response_mask"].shape
            mb.setdefault("old_logp", np.full(shape, np.nan, np.float32))
            if traced:
                mb.setdefault("old_logp_ref", np.zeros(shape, np.float32))
            minibatches.append(mb)
        return minibatches

    def _program_outputs(
        self, state: TrainState, mb: dict[str, Any], shadow: bool
    ) -> dict[str, Any]:
        """The forward program on `mb` at `state`: logp and entropy (the update's inputs; at
        theta_old also the old log-probs) and, when the shadow is traced, shadow_logp: the
        shadow program's where `shadow` (something reads it), zeros otherwise."""
        rows = {k: mb[k] for k in FORWARD_KEYS}
        out = self._program(state.params, state.fp8_meta, rows)
        if self._shadow_program is None:
            return out
        if not shadow:
            return {**out, SHADOW_KEY: jnp.zeros_like(out["logp"])}
        return {**out, SHADOW_KEY: self._shadow_program(state.params, rows)}

    def reads_shadow(self, calibrate: bool, shadow: bool) -> bool:
        """Whether the updates of an RL step read the shadow where theta != theta_old (the update
        step's `measured`): it measures the shadow, or it calibrates on each update's own."""
        return shadow or (calibrate and self.update_config.calibration.per_update)

    def update_inputs(self, state: TrainState, mb: dict[str, Any], shadow: bool) -> dict:
        """Minibatch `mb` (from `prepare`) as an update at `state` after the batch's first reads
        it: with the forward program, the programs' outputs at `state` added (`shadow`: the
        update reads the shadow, `reads_shadow`); else `mb` itself."""
        if self._program is None:
            return mb
        return {**mb, **self._program_outputs(state, mb, shadow)}

    def _prime(
        self, state: TrainState, rollout: dict[str, Any], plan: list[np.ndarray]
    ) -> TrainState:
        """`state` with primed amax histories, before the run's first update under frozen delayed
        scales: empty histories would scale every forward from its own amax (the old log-probs
        from their minibatch's, the shadow and the sampler from theirs). The first minibatch's
        update at theta_old runs on a copy of the state and is dropped; the amaxes its forward
        and backward observed become the histories."""
        mb = self.prepare(state, rollout, plan[:1], calibrate=False, first_old=False)[0]
        trial = jax.tree.map(jnp.copy, state)  # the step donates it
        trial, _ = self.update_step(trial, mb, update_flags(True, False, False, state.fp8_meta))
        return state.replace(fp8_meta=trial.fp8_meta)

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
        ratio histograms. `old_logp_full` (`old_logp_ref_full`): the trainer's (the shadow's) old
        log-probs on the whole batch;
        `ROW_KEYS` (int32): what rescores the rows later (`whole_batch_logp`, `log.trace_dumps`)."""
        mask = batch["response_mask"].astype(bool)
        rows = {k: batch[k] for k in FORWARD_KEYS}  # what `whole_batch_logp` passes: one program
        old = to_host(self._logp(old_params, old_meta, rows))
        old_ref = to_host(self._shadow_logp(old_params, {}, rows))
        new = to_host(self._logp(after.params, after.fp8_meta, rows))
        new_ref = to_host(self._shadow_logp(after.params, {}, rows))
        ratio = lambda a, b: np.where(mask, np.exp(np.where(mask, a - b, 0.0)), 1.0)
        return {
            "ratio": ratio(new, old).astype(np.float32),
            "ratio_ref": ratio(new_ref, old_ref).astype(np.float32),
            "advantages": batch["advantages"],
            "mask": mask,
            "old_prob": np.exp(old).astype(np.float32),
            "old_logp_full": old.astype(np.float32),
            "old_logp_ref_full": old_ref.astype(np.float32),
            **{k: np.asarray(batch[k], np.int32) for k in ROW_KEYS},
        }

    def whole_batch_logp(self, params: Any, fp8_meta: Any, rows: dict[str, Any]) -> np.ndarray:
        """The trainer-precision log-probs of `rows` (`FORWARD_KEYS`) as one batch, on the host:
        the forward of `ratio_probe`'s `old_logp_full`."""
        return to_host(self._logp(params, fp8_meta, {k: rows[k] for k in FORWARD_KEYS}))

    def whole_batch_shadow_logp(self, params: Any, rows: dict[str, Any]) -> np.ndarray:
        """The BF16 shadow's log-probs of `rows` as one batch, on the host: the forward of
        `ratio_probe`'s `old_logp_ref_full`."""
        return to_host(self._shadow_logp(params, {}, {k: rows[k] for k in FORWARD_KEYS}))

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
        cal = self.update_config.calibration
        calibrate, shadow = self.calibrates(rl_step), cal.measures_shadow(rl_step)
        frozen = self.update_config.frozen_scales
        if frozen and histories_empty(state.fp8_meta):
            state = self._prime(state, rollout, plan)
        # frozen delayed scales: what every forward of this batch scales from (a copy: the step
        # donates the state); the updates push their amaxes into state.fp8_meta meanwhile
        scales = jax.tree.map(jnp.copy, state.fp8_meta) if frozen else None
        at_scales = (lambda s: s.replace(fp8_meta=scales)) if frozen else (lambda s: s)
        minibatches = self.prepare(state, rollout, plan, calibrate, first_old=probe, shadow=shadow)
        old = jax.tree.map(jnp.copy, (state.params, state.fp8_meta)) if probe else None
        device_metrics, epoch = [], minibatches[: self.num_minibatches]
        pending, reuse, pooled_at = calibrate and cal.pooled, None, None
        for i, mb in enumerate(minibatches):
            if reuse is not None:  # the pooled calibration's program outputs at these params
                mb, reuse = {**mb, **reuse}, None
            elif i > 0:  # the first has the program's outputs from `prepare`
                mb = self.update_inputs(at_scales(state), mb, self.reads_shadow(calibrate, shadow))
            flags = update_flags(i == 0, calibrate, shadow, scales)
            state, metrics = self.update_step(state, mb, flags)
            device_metrics.append(metrics)
            if pending and int(to_host(state.batch_updates)) > 0:  # theta != theta_old
                pooled, pool_metrics, outs = self._pool(at_scales(state), epoch)
                state = state.replace(clip_lower=pooled.clip_lower, clip_upper=pooled.clip_upper)
                pending, pooled_at = False, (min(i + 1, len(minibatches) - 1), pool_metrics)
                if self._program is not None and i + 1 < len(epoch):
                    reuse = outs[i + 1]
        host = [
            {k: float(jnp.asarray(v)) for k, v in m.items()} for m in tree_to_host(device_metrics)
        ]
        if cal.pooled:  # reported by the first update that uses the pooled bounds; NaN elsewhere
            for m in host:
                m.update(dict.fromkeys(CALIB_METRICS, np.nan))
        if pooled_at is not None:
            at, pool_metrics = pooled_at
            host[at].update({k: float(v) for k, v in tree_to_host(pool_metrics).items()})
        if not probe:
            return state, host, None
        probed = self.ratio_probe(*old, at_scales(state), rollout)
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
