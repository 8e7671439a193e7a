"""Time masked quantile selection: jnp.quantile (sort) vs our sort and radix-bisection paths.

Prints, per size N (1e3..1e7 tokens, 70% valid), the median wall time of each method and its
ratio to jnp.nanquantile measured in the same run, for one quantile and for the 5 diagnostic
quantiles, and whether the 32-step bisection equals the sort exactly. 1e7 uses one timed rep.
Run: python -m benchmarks.bench_quantile [--max_log10=7] [--reps=3].
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

from benchmarks.timing import time_calls
from calclip_jax.rl.quantile import bisect_threshold, masked_quantile

_MAX_LOG10 = flags.DEFINE_integer("max_log10", 7, "Largest size N = 10^max_log10 tokens.")
_REPS = flags.DEFINE_integer("reps", 3, "Timed calls per method and size (median; 1 at 1e7).")

QS5 = jnp.array([0.01, 0.05, 0.5, 0.95, 0.99], jnp.float32)


def _methods(qs: jax.Array) -> dict[str, Callable]:
    return {
        "jnp.nanquantile": jax.jit(
            lambda x, m: jnp.nanquantile(jnp.where(m, x, jnp.nan), qs, method="lower")
        ),
        "sort": jax.jit(lambda x, m: masked_quantile(x, m, qs, method="sort")),
        "bisect32": jax.jit(lambda x, m: masked_quantile(x, m, qs, method="bisect", iters=32)),
        "bisect16": jax.jit(lambda x, m: masked_quantile(x, m, qs, method="bisect", iters=16)),
    }


def main(argv: list[str]) -> None:
    if len(argv) > 1:  # a stray value, e.g. of the argparse form `--reps 3 5`
        raise app.UsageError(f"unexpected arguments {argv[1:]}; flags are --flag=value")
    print(f"backend={jax.default_backend()} auto_threshold={bisect_threshold()}")
    rng = np.random.default_rng(0)
    for qs_name, qs in (("1 quantile", jnp.array([0.03], jnp.float32)), ("5 quantiles", QS5)):
        print(f"\n== {qs_name}: median seconds (ratio to jnp.nanquantile) ==")
        for log_n in range(3, _MAX_LOG10.value + 1):
            n = 10**log_n
            x = jnp.asarray(np.exp(0.1 * rng.standard_normal(n)).astype(np.float32))
            m = jnp.asarray(rng.random(n) < 0.7)
            reps = _REPS.value if n < 10**7 else 1  # keeps the whole run under ~2 min on 2 CPUs
            fns = _methods(qs)
            exact = bool(jnp.all(fns["sort"](x, m) == fns["bisect32"](x, m)))
            times = {name: time_calls(fn, x, m, reps=reps) for name, fn in fns.items()}
            base = times["jnp.nanquantile"]
            row = "  ".join(f"{k}={v:.2e}s({v / base:.2f}x)" for k, v in times.items())
            print(f"N=1e{log_n}: {row}  bisect32==sort: {exact}", flush=True)


if __name__ == "__main__":
    app.run(main)
