"""The forwards of a minibatch before its updates, and the batch-composition check.

`make_minibatch_forwards` runs a minibatch's old-policy (trainer and BF16-shadow precision) and
KL-reference log-probs in one jitted call, in the update's composition (its micro-batches);
`make_logprob_fn` is one such forward alone (probes, ratio dumps); `composition_metrics` measures
what old log-probs computed on the whole batch instead would do to the first update's ratio.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from calclip_jax.config.spec import UpdateConfig
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model import ModelConfig
from calclip_jax.model.shared_prompt import PromptGroups
from calclip_jax.train.forward import FORWARD_KEYS, batch_logprobs
from calclip_jax.train.micro_batches import map_micro


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
