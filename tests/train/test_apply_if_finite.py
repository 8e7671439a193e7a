"""The optimizer update behind the non-finite guard (`train.optimizer.apply_if_finite`): where
the gradient is finite, bitwise optax's compiled update (a `lax.cond` compiles its branch even when
called eagerly, and compiled elementwise code may round differently from op-by-op dispatch: the
update step always runs compiled); where not, params and optimizer state unchanged."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax

from calclip_jax.train.optimizer import apply_if_finite

TX = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-2, weight_decay=0.1))


def _setup():
    key1, key2 = jax.random.split(jax.random.key(0))
    params = {"w": jax.random.normal(key1, (4, 3)), "b": jnp.arange(3.0)}
    grads = {"w": jax.random.normal(key2, (4, 3)), "b": jnp.ones(3)}
    return params, grads, TX.init(params)


def _unguarded(grads, params, opt_state):
    updates, opt_state = TX.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state


def _guarded(finite, grads, params, opt_state):
    return apply_if_finite(TX, finite, grads, params, opt_state)


class ApplyIfFiniteTest(chex.TestCase):
    @chex.variants(with_jit=True, without_jit=True)
    def test_a_finite_gradient_takes_optax_update_bitwise(self):
        params, grads, opt_state = _setup()
        want = jax.jit(_unguarded)(grads, params, opt_state)
        got = self.variant(_guarded)(jnp.bool_(True), grads, params, opt_state)
        chex.assert_trees_all_equal(got, want)
        assert not np.array_equal(got[0]["w"], params["w"])

    @chex.variants(with_jit=True, without_jit=True)
    def test_a_non_finite_gradient_changes_nothing(self):
        params, grads, opt_state = _setup()
        grads["w"] = grads["w"].at[0, 0].set(jnp.nan)
        finite = jnp.isfinite(optax.tree.norm(grads))
        got = self.variant(_guarded)(finite, grads, params, opt_state)
        chex.assert_trees_all_equal(got, (params, opt_state))
