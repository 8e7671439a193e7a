"""fresh_fp8_meta (one jitted program) gives the eager init's fp8_meta exactly."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from train_testutil import TINY

from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.train import fresh_fp8_meta, init_variables


@pytest.mark.parametrize("preset", ["fp32", "fp8_delayed"])  # without and with amax histories
def test_equals_the_eager_init(preset):
    recipe = PrecisionRecipe.preset(preset)
    want = init_variables(TINY, recipe, jax.random.key(0))[1]
    got = fresh_fp8_meta(TINY, recipe)
    assert jax.tree.structure(got) == jax.tree.structure(want)
    assert (got == {}) == (not recipe.any_delayed)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert g.dtype == w.dtype and g.sharding == w.sharding
        np.testing.assert_array_equal(g, w)
