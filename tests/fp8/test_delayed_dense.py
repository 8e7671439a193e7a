"""Delayed scaling history semantics, RecipeDense paths and state, KV-cache helpers, einsum."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from calclip_jax.fp8 import (
    PRESETS,
    PrecisionRecipe,
    RecipeDense,
    TensorPrecision,
    dequantize_kv,
    fp8_dot_general,
    init_history,
    merge_fp8_meta,
    quantize_kv,
    recipe_einsum,
    scale_from_history,
    update_history,
)


def test_history_update_and_reduce():
    h = init_history(3)
    for amax in (1.0, 4.0, 2.0, 0.5):
        h = update_history(h, amax)
    np.testing.assert_array_equal(np.asarray(h), [0.5, 2.0, 4.0])  # newest first, oldest dropped
    assert float(scale_from_history(h, "e4m3")) == pytest.approx(4.0 / 448)
    assert float(scale_from_history(h, "e4m3", reduce="most_recent")) == pytest.approx(0.5 / 448)
    assert float(scale_from_history(h, "e4m3", margin=1.0)) == pytest.approx(8.0 / 448)
    assert float(update_history(h, jnp.inf)[0]) == 0.0  # non-finite amax is not recorded
    empty = init_history(4)
    assert float(scale_from_history(empty, "e4m3")) == 1.0
    assert float(scale_from_history(empty, "e4m3", fallback_amax=896.0)) == 2.0
    with pytest.raises(ValueError, match="amax_reduce"):
        scale_from_history(h, "e4m3", reduce="mean")


def _delayed_recipe(length=3):
    d = {"amax_history_len": length}
    return PrecisionRecipe.from_dict(
        {"preset": "fp8_delayed", "weights": d, "activations": d, "gradients": d}
    )


def test_recipe_dense_delayed_uses_history_before_step():
    pol = _delayed_recipe()
    model = RecipeDense(4, pol)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((2, 8)).astype(np.float32) * m for m in (1.0, 30.0, 0.1)]
    variables = model.init(jax.random.key(0), xs[0])
    kernel, meta = variables["params"]["kernel"], variables["fp8_meta"]
    np.testing.assert_array_equal(np.asarray(meta["x_amax_history"]), 0.0)
    prec = pol.activations
    for x in xs:
        y, upd = model.apply({"params": {"kernel": kernel}, "fp8_meta": meta}, x, mutable=True)
        hist = meta["x_amax_history"]
        # Expected: scale from the history *before* t (current amax only at t=0, empty history).
        x_scale = scale_from_history(hist, "e4m3", fallback_amax=np.abs(x).max())
        w_scale = scale_from_history(
            meta["kernel_amax_history"], "e4m3", fallback_amax=jnp.abs(kernel).max()
        )
        want = fp8_dot_general(
            x,
            kernel,
            (((1,), (0,)), ((), ())),
            lhs_prec=prec,
            rhs_prec=prec,
            lhs_scale=x_scale,
            rhs_scale=w_scale,
        )
        np.testing.assert_array_equal(np.asarray(y), np.asarray(want))
        meta = upd["fp8_meta"]
        assert float(meta["x_amax_history"][0]) == pytest.approx(np.abs(x).max())
    # After a 30x spike the step-2 input (0.1x) is quantized with the spike's large scale.
    y2 = model.apply({"params": {"kernel": kernel}, "fp8_meta": meta}, xs[2])
    assert not np.allclose(np.asarray(y2), xs[2] @ np.asarray(kernel), rtol=0.05)


def test_gradient_history_overwrite_with_gradient():
    pol = _delayed_recipe(length=2)
    model = RecipeDense(4, pol)
    x = jnp.ones((3, 8))
    variables = model.init(jax.random.key(0), x)

    @jax.jit
    def step(params, meta, c):
        def loss(p, m):
            y, upd = model.apply({"params": p, "fp8_meta": m}, x, mutable=["fp8_meta"])
            return jnp.sum(y * c), upd["fp8_meta"]

        (_, upd), (_, gmeta) = jax.value_and_grad(loss, (0, 1), has_aux=True)(params, meta)
        return merge_fp8_meta(upd, gmeta)

    meta = variables["fp8_meta"]
    for c in (2.0, 5.0, 3.0):
        meta = step(variables["params"], meta, c)
    np.testing.assert_array_equal(np.asarray(meta["grad_amax_history"]), [3.0, 5.0])
    np.testing.assert_array_equal(np.asarray(meta["x_amax_history"]), [1.0, 1.0])


@pytest.mark.parametrize("name", PRESETS)
def test_recipe_dense_presets(name):
    pol = PrecisionRecipe.preset(name)
    x = jax.random.normal(jax.random.key(1), (2, 3, 40))
    model = RecipeDense(6, pol, use_bias=True)
    variables = model.init(jax.random.key(2), x)
    assert jax.tree.map(jnp.shape, variables["params"]) == {"kernel": (40, 6), "bias": (6,)}
    assert set(variables) == ({"params", "fp8_meta"} if name == "fp8_delayed" else {"params"})
    y = model.apply(variables, x)
    assert y.shape == (2, 3, 6) and y.dtype == jnp.float32
    p = variables["params"]
    y0 = x @ p["kernel"] + p["bias"]
    tol = {"fp32": 1e-5, "bf16": 3e-2}.get(name, 0.15)
    np.testing.assert_allclose(np.asarray(y), np.asarray(y0), atol=tol * float(jnp.abs(y0).max()))
    # recipe_einsum (stateless) agrees with the layer for the non-delayed recipes.
    if name != "fp8_delayed":
        ye = recipe_einsum("btk,kn->btn", x, p["kernel"], pol) + p["bias"]
        np.testing.assert_array_equal(np.asarray(ye), np.asarray(y))


def test_lm_head_role_uses_lm_head_precision():
    pol = PrecisionRecipe.from_dict({"preset": "fp8_tensor", "lm_head": {"dtype": "fp32"}})
    x = jax.random.normal(jax.random.key(3), (3, 16))
    head = RecipeDense(5, pol, role="lm_head")
    v = head.init(jax.random.key(4), x)
    np.testing.assert_allclose(
        np.asarray(head.apply(v, x)), np.asarray(x @ v["params"]["kernel"]), rtol=1e-5
    )
    with pytest.raises(ValueError, match="role"):
        RecipeDense(5, pol, role="attention").init(jax.random.key(4), x)


def test_recipe_einsum_layouts():
    pol = PrecisionRecipe.preset("fp32")
    x = jax.random.normal(jax.random.key(5), (2, 3, 8))
    w = jax.random.normal(jax.random.key(6), (8, 4, 5))
    got = recipe_einsum("bsd,dhk->bshk", x, w, pol)
    np.testing.assert_allclose(got, jnp.einsum("bsd,dhk->bshk", x, w), rtol=1e-5, atol=1e-5)
    got = recipe_einsum("bsd,dhk->bhks", x, w, pol)
    np.testing.assert_allclose(got, jnp.einsum("bsd,dhk->bhks", x, w), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError):
        recipe_einsum("bsd,dk->bs", x, w[:, 0], pol)


@pytest.mark.parametrize("dtype", ["e4m3", "e5m2", "bf16"])
def test_kv_quantize_per_token_head(dtype):
    prec = TensorPrecision(dtype)
    kv = jax.random.normal(jax.random.key(7), (2, 5, 3, 16)) * jnp.arange(1, 6)[:, None, None]
    values, scale = quantize_kv(kv, prec)
    assert values.shape == kv.shape and values.dtype == prec.jnp_dtype
    assert scale.shape == (2, 5, 3, 1)
    back = dequantize_kv(values, scale)
    rel = {"e4m3": 2.0**-4, "e5m2": 2.0**-3, "bf16": 2.0**-8}[dtype]
    amax = jnp.max(jnp.abs(kv), axis=-1, keepdims=True)
    sub = {"e4m3": 2.0**-10 / 448, "e5m2": 2.0**-17 / 57344, "bf16": 0.0}[dtype]
    assert bool(jnp.all(jnp.abs(back - kv) <= rel * jnp.abs(kv) * 1.0001 + sub * amax * 1.01))
    if prec.is_fp8:
        np.testing.assert_allclose(
            np.asarray(jnp.max(jnp.abs(values.astype(jnp.float32)), -1)), prec_max(dtype)
        )


def prec_max(dtype):
    return {"e4m3": 448.0, "e5m2": 57344.0}[dtype]


def test_module_inside_parent_keeps_param_names():
    class Two(nn.Module):
        recipe: PrecisionRecipe

        @nn.compact
        def __call__(self, x):
            return RecipeDense(3, self.recipe, name="up_proj")(x)

    v32 = Two(PrecisionRecipe.preset("fp32")).init(jax.random.key(0), jnp.ones((1, 4)))
    vmx = Two(PrecisionRecipe.preset("fp8_mx")).init(jax.random.key(0), jnp.ones((1, 4)))
    assert jax.tree.structure(v32) == jax.tree.structure(vmx)
    assert v32["params"]["up_proj"]["kernel"].shape == (4, 3)


def test_fp8_dot_general_delayed_grad_needs_history():
    x, w = jnp.ones((2, 4)), jnp.ones((4, 3))
    gp = TensorPrecision("e5m2", "tensor", scaling="delayed")
    dn = (((1,), (0,)), ((), ()))
    with pytest.raises(ValueError, match="grad_amax_history"):
        fp8_dot_general(x, w, dn, grad_prec=gp)
    hist = init_history(2)
    g_hist = jax.grad(
        lambda h: jnp.sum(fp8_dot_general(x, w, dn, grad_prec=gp, grad_amax_history=h) * 7.0)
    )(hist)
    np.testing.assert_array_equal(np.asarray(g_hist), [7.0, 0.0])  # the updated history
