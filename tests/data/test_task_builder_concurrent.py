"""Two processes preparing the same tfds dataset at once (parallel sweep arms) both read it."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
from calclip_jax.data import get_task, load_split
task = get_task("arithmetic", max_digits=2, num_train=300, num_test=40)
train = load_split(task, "train", sys.argv[1])
test = load_split(task, "test", sys.argv[1])
assert len(train) == 300 and len(test) == 40, (len(train), len(test))
print(train[0].prompt, flush=True)
"""


def test_concurrent_prepare_and_read(tmp_path):
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=180) for p in procs]
    for proc, (_, err) in zip(procs, outs, strict=True):
        assert proc.returncode == 0, err[-2000:]
    assert outs[0][0].splitlines()[-1] == outs[1][0].splitlines()[-1]  # tfds also prints
