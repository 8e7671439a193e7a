"""Stage 2: the RL loop. rollout -> reward -> advantages -> PPO minibatch steps -> eval.

`RLRun` owns the jitted functions, the state and the outputs of one run; `run()` resumes from
the latest checkpoint in the workdir when there is one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from ml_collections import ConfigDict

from calclip_jax.data import Example
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.train.build import RunSpec
from calclip_jax.train.checkpoints import Checkpointer
from calclip_jax.train.collect import Collector, RolloutConfig
from calclip_jax.train.evaluate import greedy_eval, max_prompt_len
from calclip_jax.train.mesh import make_mesh
from calclip_jax.train.multihost import is_leader, sync
from calclip_jax.train.optimizer import make_optimizer
from calclip_jax.train.ppo_update import PPOUpdater
from calclip_jax.train.run_logger import RunLogger
from calclip_jax.train.sharded import jit_update_step, shard_state
from calclip_jax.train.state import create_train_state, init_variables
from calclip_jax.train.update_step import make_update_step


def _nanmean(values: list[float]) -> float:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.mean(finite)) if finite else float("nan")


class RLRun:
    """One RL run in `workdir` from `params` (the SFT warm start)."""

    def __init__(
        self,
        spec: RunSpec,
        config: ConfigDict,
        workdir: str,
        params: Any,
        train: Sequence[Example],
        test: Sequence[Example],
        log: Callable[[str], None] = print,
    ) -> None:
        self.spec, self.config, self.workdir, self.log = spec, config, workdir, log
        update_cfg = spec.step
        self.mesh = make_mesh(config.mesh.data, config.mesh.fsdp, config.mesh.tensor)
        self.tx = make_optimizer(update_cfg.optim)
        fp8_meta = self._init_meta(update_cfg.recipe)
        state = create_train_state(
            params, fp8_meta, self.tx, update_cfg.rl.eps_low, update_cfg.rl.eps_high
        )
        self.state = shard_state(state, self.mesh)
        self.rollout_meta = self._init_meta(spec.rollout_recipe)
        self.test = list(test[: config.eval.num_prompts])
        self.prompt_len = max_prompt_len(spec.tokenizer, spec.task)
        r = config.rollout
        rollout_cfg = RolloutConfig(
            r.prompts_per_step,
            r.samples_per_prompt,
            r.max_new_tokens,
            r.temperature,
            r.top_k,
            r.top_p,
            r.max_refill_rounds,
        )
        self.collector = Collector(
            spec.model,
            spec.rollout_recipe,
            spec.task,
            spec.tokenizer,
            train,
            self.prompt_len,
            rollout_cfg,
            update_cfg.rl,
            config.seed,
        )
        # a copy (on the mesh, like the state): the state's buffers are donated to the train step
        kl = update_cfg.rl.kl_beta > 0
        self.ref_params = jax.tree.map(jnp.copy, self.state.params) if kl else None
        self._step_fn = make_update_step(spec.model, update_cfg, self.tx)
        self._ppo: PPOUpdater | None = None
        self.checkpointer = Checkpointer(workdir)
        self.logger = RunLogger(workdir, active=is_leader())

    def _init_meta(self, recipe: PrecisionRecipe) -> Any:
        """Fresh (empty) amax histories of `recipe`; {} unless it uses delayed scaling."""
        return init_variables(self.spec.model, recipe, jax.random.key(0))[1]

    def _updater(self) -> PPOUpdater:
        """The PPO updater, built (and its step jitted with shardings) on the first batch only:
        a new updater per step would re-trace its jitted log-prob functions every step."""
        if self._ppo is None:
            self._ppo = PPOUpdater(
                self.spec.model,
                self.spec.step,
                None,
                epochs=self.config.train.ppo_epochs,
                num_minibatches=self.config.train.num_minibatches,
                ref_params=self.ref_params,
            )
            keys = dict.fromkeys(self._ppo.batch_keys())
            self._ppo.update_step = jit_update_step(self._step_fn, self.state, keys, self.mesh)
        return self._ppo

    def sampler_meta(self) -> Any:
        """Amax histories for a delayed-scaling sampler: the trainer's when it has them (weight
        sync carries them along), else the sampler's own empty ones; None otherwise."""
        if not self.spec.rollout_recipe.any_delayed:
            return None
        return self.state.fp8_meta if self.spec.step.recipe.any_delayed else self.rollout_meta

    def evaluate(self) -> dict[str, float]:
        """Greedy accuracy on the test prompts, sampled in the rollout precision."""
        return greedy_eval(
            self.state.params,
            self.spec.model,
            self.spec.rollout_recipe,
            self.spec.tokenizer,
            self.spec.task,
            self.test,
            self.prompt_len,
            self.config.rollout.max_new_tokens,
            fp8_meta=self.sampler_meta(),
        )

    def resume(self) -> int:
        """Restores the latest checkpoint if any; returns the number of completed RL steps."""
        latest = self.checkpointer.latest_step()
        if latest is None:
            return 0
        self.state = self.checkpointer.restore(latest, self.state)
        self.logger.truncate_after(latest)
        self.log(f"resumed from checkpoint at RL step {latest}")
        return latest

    def rl_step(self, step: int) -> dict[str, float]:
        """RL step `step` (1-based): returns its metrics row."""
        t0 = time.perf_counter()
        c = self.config
        got = self.collector.collect(self.state.params, self.sampler_meta(), step)
        t1 = time.perf_counter()
        updater = self._updater()
        rng = np.random.default_rng([c.seed, step, 1_000_003])
        probe = c.log.ratios_every > 0 and step % c.log.ratios_every == 0
        self.state, step_metrics, probed = updater.update(self.state, got.batch, rng, step, probe)
        if probed is not None:
            self.logger.write_arrays("ratios", step, probed)
        t2 = time.perf_counter()
        row = dict(got.metrics)
        for name in step_metrics[0]:  # the mean over this batch's updates
            row[name] = _nanmean([m.get(name) for m in step_metrics])
        row["clip_lower"], row["clip_upper"] = (
            step_metrics[-1]["clip_lower"],
            step_metrics[-1]["clip_upper"],
        )
        row.update(rollout_time_s=t1 - t0, train_time_s=t2 - t1)
        if step % c.log.samples_every == 0 or step == 1:
            self.logger.write_samples(step, got.samples[: c.log.num_samples])
        return row

    def run(self, progress: bool = True) -> dict[str, Any]:
        """Runs (or resumes) to config.train.steps; returns the summary."""
        c = self.config
        start_step = self.resume()
        rows: list[dict[str, Any]] = []
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=c.train.steps, initial=start_step, desc="rl", dynamic_ncols=True)
        t_run = time.perf_counter()
        for step in range(start_step + 1, c.train.steps + 1):
            t0 = time.perf_counter()
            row = self.rl_step(step)
            if step % c.eval.every == 0 or step == 1 or step == c.train.steps:
                ev = self.evaluate()
                row.update(
                    eval_accuracy=ev["accuracy"],
                    eval_reward=ev["reward"],
                    eval_garbled_frac=ev["garbled_frac"],
                )
            row["step_time_s"] = time.perf_counter() - t0
            self.logger.write(step, row)
            rows.append(row)
            if step % c.log.checkpoint_every == 0 or step == c.train.steps:
                self.checkpointer.save(step, self.state)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(
                    reward=f"{row['reward_mean']:.3f}",
                    entropy=f"{row['entropy']:.3f}",
                    clipL=f"{row['clip_frac_lower_neg']:.3f}",
                )
        if bar is not None:
            bar.close()
        self.checkpointer.close()
        self.logger.close()
        sync("rl_run_done")  # metrics.jsonl is complete before any process reads it
        return {"wall_time_s": time.perf_counter() - t_run, "new_steps": len(rows)}
