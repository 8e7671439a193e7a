"""FP8-vs-BF16 ratio distortion on text the model samples, every precision on identical parameters.

    python -m experiments.distortion --config=configs/smollm2.py --out=results/smollm2_distortion

The real-model version of section 1 of results/RESULTS.md ("same parameters, two precisions"
isolates precision noise):
1. theta_0: the run's warm start (`warm_start`: the cached SFT, or it is trained and cached);
2. one rollout batch: the run's `Collector` at RL step 1 with a BF16 sampler at
   rollout.temperature, --num_prompts train prompts x rollout.samples_per_prompt, verified,
   GRPO advantages (DAPO configs: dynamic sampling as in a run);
3. theta_1 .. theta_K (K = --updates): K successive minibatch updates of the run's own update
   step in --update_precision, on the run's minibatch plan of RL step 1 (train.num_minibatches
   minibatches per epoch, as many epochs as K needs; old log-probs per minibatch at theta_0, as
   in a run), with the run's RL preset, correction and optimizer, calibration off. theta_k does
   not depend on the precision being measured;
4. per precision P (--precisions, BF16 always included as the reference): token log-probs of the
   WHOLE batch at theta_0 (twice) .. theta_K, so old and new share the batch composition and
   r_P = 1 exactly at theta_0 (checked, else the run stops);
5. statistics (`calclip_jax.analysis.distortion`) -> --out: distortion.json (every number, the
   config and command), distortion.md (tables), distortion.png, tokens.npz (raw arrays).
Delayed scaling (fp8_delayed) needs amax-history state and is not measured.
"""

from __future__ import annotations

import os
import sys

from absl import app, flags, logging
from ml_collections import config_flags

from calclip_jax.probes.distortion import PRECISIONS, run_distortion

_DEFAULT_CONFIG = os.path.join(os.path.dirname(__file__), "..", "configs", "default.py")
_CONFIG = config_flags.DEFINE_config_file("config", _DEFAULT_CONFIG, "Config file[:arm].")
_OUT = flags.DEFINE_string("out", "results/smollm2_distortion", "Output folder.")
_NUM_PROMPTS = flags.DEFINE_integer(
    "num_prompts", None, "Train prompts in the batch; default rollout.prompts_per_step."
)
_UPDATES = flags.DEFINE_integer("updates", 4, "K: parameter sets theta_1..theta_K.")
_PRECISIONS = flags.DEFINE_list("precisions", list(PRECISIONS), "Precision presets measured.")
_UPDATE_PRECISION = flags.DEFINE_string("update_precision", "bf16", "Update step precision.")


def main(argv: list[str]) -> None:
    del argv
    run_distortion(
        _CONFIG.value,
        _OUT.value,
        num_prompts=_NUM_PROMPTS.value,
        updates=_UPDATES.value,
        precisions=_PRECISIONS.value,
        update_precision=_UPDATE_PRECISION.value,
        command=sys.argv,
    )


if __name__ == "__main__":
    logging.set_verbosity(logging.WARNING)
    app.run(main)
