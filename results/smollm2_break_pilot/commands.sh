# The regime built to break at a third of its learning rate (3e-6), fp8_tensor_tis, seed 0, 6 RL
# steps with the BF16 shadow and a ratio dump at every step (docs/break_regime.md, "The look").
python -m experiments.train --config=configs/smollm2_break.py --workdir=results/smollm2_break_pilot/fp8_tensor_tis_lr3e-6__seed0 --config.calibration.sample=batch --config.calibration.shadow_every=1 --config.log.checkpoint_every=100 --config.log.quiet=true --config.log.ratios_every=1 --config.log.samples_every=2 --config.seed=0 --config.train.steps=6 --config.train.learning_rate=3e-6 --config.calibration.enabled=false --config.correction.mode=token_tis --config.rollout.precision=fp8_tensor --config.train.precision=fp8_tensor
python -m experiments.paired_report --sweep=results/smollm2_break_pilot --baseline=fp8_tensor_tis_lr3e-6
python -m experiments.clipped_trace --sweep=results/smollm2_break_pilot
