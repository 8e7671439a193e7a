"""Train state, mesh and sharding, the jitted update step, the PPO updater and the RL loop."""

from calclip_jax.config.spec import UpdateConfig
from calclip_jax.parallel.mesh import make_mesh
from calclip_jax.rl.calibration import CalibrationConfig
from calclip_jax.train.optimizer import make_optimizer
from calclip_jax.train.ppo_update import PPOUpdater, make_logprob_fn
from calclip_jax.train.sharded import jit_update_step, shard_state, state_shardings
from calclip_jax.train.state import (
    TrainState,
    create_train_state,
    fresh_fp8_meta,
    init_variables,
)
from calclip_jax.train.update_step import make_update_step, update_flags

__all__ = [
    "CalibrationConfig",
    "PPOUpdater",
    "TrainState",
    "UpdateConfig",
    "create_train_state",
    "fresh_fp8_meta",
    "init_variables",
    "jit_update_step",
    "make_logprob_fn",
    "make_mesh",
    "make_optimizer",
    "make_update_step",
    "shard_state",
    "state_shardings",
    "update_flags",
]
