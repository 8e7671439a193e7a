"""Stage 1: supervised warm start on task demonstrations, cached by config hash.

Every arm of a sweep with the same model, task, tokenizer, SFT settings and seed gets the
identical starting weights from the cache (written atomically by orbax, with a checksum
manifest; its report file, written last, marks it complete). A damaged cache (missing report,
checksum mismatch, missing or truncated files, an orbax read error) is rebuilt, with a log line.
In a multi-process run the leader alone trains and writes the cache; the others then read it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp

from calclip_jax.config.schema import SFTConfig
from calclip_jax.config.spec import RunSpec
from calclip_jax.data import Example, Task, Tokenizer, encode_sft_batch
from calclip_jax.filelock import file_lock
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model import (
    ModelConfig,
    Transformer,
    load_checkpoint,
    positions_from_mask,
    token_logprobs_and_entropy,
)
from calclip_jax.parallel.multihost import is_leader, leader_first
from calclip_jax.rollout.generate import max_prompt_len
from calclip_jax.train.evaluate import greedy_eval
from calclip_jax.train.state import init_variables, on_default_device
from calclip_jax.train.timing import Progress
from calclip_jax.workdir.checksums import manifest_problem, write_manifest


def sft_cache_key(
    model: ModelConfig,
    task: Task,
    tokenizer: Tokenizer,
    cfg: SFTConfig,
    seed: int,
    checkpoint: str | None = None,
) -> str:
    """Hash of everything the SFT result depends on: the model, task, tokenizer (a character
    tokenizer's alphabet), SFT knobs, seed and the starting checkpoint (its file, if any)."""
    fields = {
        "model": model.to_dict(),
        "task": task.name,
        "knobs": task.data_knobs(),
        "alphabet": getattr(tokenizer, "alphabet", None),
        "sft": {k: v for k, v in dataclasses.asdict(cfg).items() if k != "cache_dir"},
        "seed": seed,
    }
    if checkpoint is not None:  # the file identifies the weights and the tokenizer
        stat = os.stat(checkpoint)
        fields["checkpoint"] = [os.path.abspath(checkpoint), stat.st_size, stat.st_mtime_ns]
    blob = json.dumps(fields, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def make_sft_step(model_config: ModelConfig, tx: optax.GradientTransformation) -> Callable:
    """Jitted (params, opt_state, batch) -> (params, opt_state, loss): masked cross-entropy."""
    model = Transformer(model_config, PrecisionRecipe.preset("fp32"))

    def loss_fn(params, tokens, attn, loss_mask):
        logits, _ = model.apply({"params": params}, tokens, positions_from_mask(attn), attn)
        logp, _ = token_logprobs_and_entropy(logits, tokens, loss_mask)
        return -jnp.sum(logp) / jnp.maximum(jnp.sum(loss_mask), 1)

    @jax.jit
    def step(params, opt_state, tokens, attn, loss_mask):
        loss, grads = jax.value_and_grad(loss_fn)(params, tokens, attn, loss_mask)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return step


def run_sft(
    params: Any,
    model_config: ModelConfig,
    task: Task,
    tokenizer: Tokenizer,
    train: Sequence[Example],
    cfg: SFTConfig,
    seed: int,
    evaluate: Callable[[Any], dict[str, float]],
    log: Callable[[str], None] = print,
    progress: bool = False,
) -> tuple[Any, dict[str, Any]]:
    """Trains until greedy accuracy >= target or `cfg.updates` updates; returns (params, report).
    `progress`: a bar (or periodic lines off a terminal) over the updates."""
    tx = optax.adamw(optax.cosine_decay_schedule(cfg.learning_rate, max(cfg.updates, 1)))
    opt_state = tx.init(params)
    step = make_sft_step(model_config, tx)
    rng = np.random.default_rng(seed)
    seq_len = max(len(tokenizer.encode(_demonstration(tokenizer, ex))) for ex in train) + 2
    report: dict[str, Any] = {"updates": 0, "accuracy": 0.0, "loss": float("nan")}
    bar = Progress(cfg.updates, "sft", enabled=progress, log=log)
    for i in range(1, cfg.updates + 1):
        idx = rng.integers(0, len(train), size=cfg.batch_size)
        batch = encode_sft_batch(
            tokenizer,
            [tokenizer.format_prompt(train[j].prompt, train[j].system) for j in idx],
            [train[j].answer for j in idx],
            max_len=seq_len,
        )
        params, opt_state, loss = step(
            params, opt_state, batch.tokens_BT, batch.attn_mask_BT, batch.loss_mask_BT
        )
        bar.update(1)  # no loss here: reading it would wait for the device every update
        if i % cfg.eval_every == 0 or i == cfg.updates:
            acc = evaluate(params)["accuracy"]
            report = {"updates": i, "accuracy": acc, "loss": float(loss)}
            bar.update(0, loss=f"{float(loss):.3f}", accuracy=f"{acc:.3f}")
            log(f"sft update {i}: loss {float(loss):.3f}, greedy test accuracy {acc:.3f}")
            if acc >= cfg.target_accuracy:
                break
    bar.close()
    return params, report


def cached_sft(
    cache_dir: str,
    key: str,
    start: Callable[[], Any],
    shapes: Any,
    train_fn: Callable[[Any], tuple[Any, dict]],
    log: Callable[[str], None] = print,
) -> tuple[Any, dict[str, Any]]:
    """Loads SFT params from cache_dir/sft/<key>, or trains `start()` and stores the result
    (leader first). `shapes` (ShapeDtypeStructs of `start()`'s tree) is the restore target, so
    a cache hit in a single-process run neither initializes nor reads the starting params."""
    lock = os.path.join(cache_dir, "sft", f"{key}.lock")  # concurrent runs on one machine
    with leader_first(f"sft_cache_{key}"), file_lock(lock):
        return _cached_sft(cache_dir, key, start, shapes, train_fn, log)


def _cached_sft(
    cache_dir: str,
    key: str,
    start: Callable[[], Any],
    shapes: Any,
    train_fn: Callable[[Any], tuple[Any, dict]],
    log: Callable[[str], None],
) -> tuple[Any, dict[str, Any]]:
    path = os.path.abspath(os.path.join(cache_dir, "sft", key))
    report_path = path + ".json"
    # process-local I/O of this process's own arrays; with several processes orbax takes those
    # only as NumPy (the files are the same)
    me, numpy_io = jax.process_index(), jax.process_count() > 1
    local = ocp.options.MultiprocessingOptions(primary_host=me, active_processes={me})
    ckpt = ocp.StandardCheckpointer(multiprocessing_options=local)
    if os.path.isdir(path) or os.path.exists(report_path):
        target = jax.device_get(start()) if numpy_io else on_default_device(shapes)
        cached = _load_cache(ckpt, path, report_path, target)
        if not isinstance(cached, str):
            log(f"sft: using cached warm start {path}")
            return cached
        log(f"sft: cached warm start {path} is damaged ({cached}); rebuilding it")
    params, report = train_fn(start())
    os.makedirs(os.path.dirname(path), exist_ok=True)
    for stale in (report_path, path):  # what a damaged cache or a killed writer left
        if os.path.isdir(stale):
            shutil.rmtree(stale)
        elif os.path.exists(stale):
            os.remove(stale)
    ckpt.save(path, jax.device_get(params) if numpy_io else params)
    ckpt.wait_until_finished()
    write_manifest(path)
    with open(report_path + ".tmp", "w") as f:
        json.dump(report, f)
    os.replace(report_path + ".tmp", report_path)
    return params, report


def _load_cache(
    ckpt: ocp.StandardCheckpointer, path: str, report_path: str, target: Any
) -> tuple[Any, dict[str, Any]] | str:
    """(params restored into `target`, report) of an intact cache entry, else what is wrong."""
    if not os.path.exists(report_path):
        return f"no {os.path.basename(report_path)}: its writer did not finish"
    problem = manifest_problem(path)
    if problem is not None:
        return problem
    try:
        with open(report_path) as f:
            report = json.load(f)
        return ckpt.restore(path, target), report
    except Exception as err:  # orbax/tensorstore/json raise many kinds
        return f"unreadable: {type(err).__name__}"


def _demonstration(tokenizer: Tokenizer, example: Example) -> str:
    """SFT text: the prompt as the tokenizer formats it, then the reference answer."""
    return tokenizer.format_prompt(example.prompt, example.system) + example.answer


def starting_params(spec: RunSpec) -> Any:
    """The params a run starts from: the checkpoint's (`model.checkpoint`) or fresh, seeded."""
    if spec.checkpoint is not None:
        return load_checkpoint(spec.checkpoint)[1]
    return init_variables(spec.model, spec.update.recipe, jax.random.key(spec.config.seed))[0]


def starting_params_shapes(spec: RunSpec) -> Any:
    """ShapeDtypeStructs of `starting_params(spec)` (a checkpoint's tree is the fresh model's),
    traced without initializing or reading any weight."""
    init = lambda: init_variables(spec.model, spec.update.recipe, jax.random.key(0))[0]
    return jax.eval_shape(init)


def warm_start(
    spec: RunSpec, splits: dict[str, Sequence[Example]], log: Callable[[str], None] = print
) -> tuple[Any, dict[str, Any]]:
    """The RL start: the checkpoint's params (`model.checkpoint`) or fresh ones (seeded), trained
    by SFT in float32, or the cached result of an identical SFT; with sft.updates = 0 the
    starting params themselves. Returns (params, report)."""
    run = spec.config
    prompt_len = max_prompt_len(spec.tokenizer, spec.task)
    test = splits["test"][: run.eval.num_prompts]
    fp32 = PrecisionRecipe.preset("fp32")

    def evaluate(p: Any) -> dict[str, float]:
        return greedy_eval(
            p,
            spec.model,
            fp32,
            spec.tokenizer,
            spec.task,
            test,
            prompt_len,
            run.rollout.max_new_tokens,
        )

    if run.sft.updates == 0:
        params = starting_params(spec)
        return params, {"accuracy": evaluate(params)["accuracy"], "updates": 0}
    key = sft_cache_key(spec.model, spec.task, spec.tokenizer, run.sft, run.seed, spec.checkpoint)

    def train_fn(p: Any) -> tuple[Any, dict[str, Any]]:
        return run_sft(
            p,
            spec.model,
            spec.task,
            spec.tokenizer,
            splits["train"],
            run.sft,
            run.seed,
            evaluate,
            log=log,
            progress=not run.log.quiet and is_leader(),
        )

    start = lambda: starting_params(spec)
    return cached_sft(spec.cache_dir, key, start, starting_params_shapes(spec), train_fn, log=log)
