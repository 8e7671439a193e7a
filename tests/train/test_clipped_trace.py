"""The clipped-token trace (train/clipped_trace.py): earlier ratio dumps rescored from files."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from train_testutil import TINY, make_setup, rollout_batch

from calclip_jax.train import PPOUpdater, make_update_step
from calclip_jax.train.clipped_trace import rescore_dumps, write_trace
from calclip_jax.workdir import run_record as R
from calclip_jax.workdir.ratio_dumps import load_trace
from calclip_jax.workdir.run_logger import RunLogger


def test_a_dump_rescored_at_its_old_policy_is_its_old_logp_full(tmp_path):
    """Per-tensor FP8 (a token's log-prob depends on its batch-mates): the dumped rows, read
    back and scored whole at theta_old, give old_logp_full bit for bit; at the parameters after
    the batch's updates, the dump's own ratio."""
    cfg, tx, state = make_setup("fp8_tensor", lr=3e-2)
    step = jax.jit(make_update_step(TINY, cfg, tx))
    updater = PPOUpdater(TINY, cfg, step, num_minibatches=2, ref_params=state.params)
    theta_old = jax.tree.map(jnp.copy, (state.params, state.fp8_meta))
    rng = np.random.default_rng(0)
    after, _, probed = updater.update(state, rollout_batch(seed=3), rng, rl_step=1, probe=True)
    assert all(probed[k].dtype == np.int32 for k in ("tokens", "positions", "attn_mask"))
    logger = RunLogger(str(tmp_path), tensorboard=False)
    logger.write_ratio_dump(1, probed)

    at_old = lambda rows: updater.whole_batch_logp(*theta_old, rows)
    shadow_at_old = lambda rows: updater.whole_batch_shadow_logp(theta_old[0], rows)
    trace = rescore_dumps(tmp_path, 2, 1, at_old, shadow_at_old)
    assert list(trace) == ["logp_s000001", "logp_ref_s000001"]
    np.testing.assert_array_equal(trace["logp_s000001"], probed["old_logp_full"])
    np.testing.assert_array_equal(trace["logp_ref_s000001"], probed["old_logp_ref_full"])

    write_trace(logger, updater, after, 2, 1)
    path = R.trace_path(tmp_path, 2)
    (now,), (now_ref,) = load_trace(path).values(), load_trace(path, shadow=True).values()
    mask = probed["mask"]
    for logp, old, ratio in (
        (now, probed["old_logp_full"], probed["ratio"]),
        (now_ref, probed["old_logp_ref_full"], probed["ratio_ref"]),
    ):
        got = np.exp(logp - old)[mask]
        np.testing.assert_allclose(got, ratio[mask], rtol=1e-6)
        assert np.abs(np.log(got)).max() > 1e-3  # the updates moved the policy
    assert np.abs(now - now_ref)[mask].max() > 1e-3  # FP8 and its BF16 shadow differ


def _dump(tmp_path, step: int, rows: bool = True) -> dict[str, np.ndarray]:
    batch = rollout_batch(seed=step)
    arrays = {
        "ratio": np.ones(batch["tokens"].shape, np.float32),
        "advantages": batch["advantages"],
        "mask": batch["response_mask"].astype(bool),
    }
    if rows:
        arrays.update({k: batch[k] for k in ("tokens", "positions", "attn_mask")})
    RunLogger(str(tmp_path), tensorboard=False).write_ratio_dump(step, arrays)
    return batch


def test_the_latest_earlier_dumps_with_rows_are_rescored(tmp_path):
    _dump(tmp_path, 1, rows=False)  # written before dumps held their rows
    batches = {s: _dump(tmp_path, s) for s in (2, 4, 6)}
    seen = []

    def tokens(rows):  # a stand-in scorer: the rows it was given, as floats
        seen.append(rows)
        return rows["tokens"].astype(np.float64)

    got = rescore_dumps(tmp_path, 6, 2, tokens)
    assert list(got) == ["logp_s000002", "logp_s000004"] and got["logp_s000004"].dtype == np.float32
    np.testing.assert_array_equal(got["logp_s000004"], batches[4]["tokens"])
    for key in ("tokens", "positions", "attn_mask", "response_mask"):  # as the rollout gave them
        np.testing.assert_array_equal(seen[-1][key], batches[4][key])
        assert seen[-1][key].dtype == np.int32
    assert list(rescore_dumps(tmp_path, 6, 5, tokens)) == ["logp_s000002", "logp_s000004"]
    assert list(rescore_dumps(tmp_path, 5, 1, tokens)) == ["logp_s000004"]
    assert rescore_dumps(tmp_path, 2, 3, tokens) == {}  # only the old-format dump before it
    assert rescore_dumps(tmp_path, 6, 0, tokens) == {}
