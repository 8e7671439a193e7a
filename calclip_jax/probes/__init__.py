"""Offline probes, apart from the training loop: the FP8-vs-BF16 ratio distortion on identical
parameters (`distortion`), a run's first rollout batch (`first_batch`), scoring a run's
checkpoint (`eval_checkpoint`), exporting it as a Hugging Face directory (`export_checkpoint`)."""
