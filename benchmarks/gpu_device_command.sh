# The prepared GPU run on a lent H200, as the device tool's `run` command (docs/measurements.md,
# "GPU run"). First, here, with network: `python -m benchmarks.gpu_kit` (writes the carried
# folders). Then call `run` with command = this file's lines that are not comments, joined by
# spaces (tests/experiments/test_gpu_device_command.py checks it stays under 2000 characters),
# and the carry and timeout_s below. The wheel install is the device README's, but a failed
# install goes on (gemm and step need no carried wheel) instead of exiting.
# carry: .whl .gpu_kit
# timeout_s: 600
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || echo "gpu_kit: WHEEL INSTALL FAILED, rl will fail";
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $OUT/nvidia_smi.csv;
set -o pipefail; PYTHONUNBUFFERED=1 python3 -m benchmarks.gpu_run --out=$OUT --rl_checkpoint=.gpu_kit/smollm2_shapes.gguf --deadline_s=520 2>&1 | tee $OUT/gpu_run.log
