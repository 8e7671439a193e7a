"""params_digest: equal for bitwise-equal trees, different after one ulp, a dtype or a name."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from calclip_jax.workdir.params_digest import DIGEST_CHARS, params_digest


def _tree():
    return {"b": {"w": jnp.arange(6.0, dtype=jnp.float32).reshape(2, 3)}, "a": jnp.ones(4)}


def test_digest_tells_bitwise_equal_trees_from_others():
    d = params_digest(_tree())
    assert len(d) == DIGEST_CHARS and d == params_digest(_tree())
    assert d == params_digest({"a": np.ones(4, np.float32), "b": {"w": _tree()["b"]["w"]}})
    nudged = _tree()
    nudged["b"]["w"] = nudged["b"]["w"].at[1, 2].set(np.nextafter(np.float32(5), np.float32(6)))
    assert params_digest(nudged) != d
    assert params_digest({**_tree(), "a": jnp.ones(4, jnp.bfloat16)}) != d
    assert params_digest({"c": _tree()["a"], "b": _tree()["b"]}) != d
