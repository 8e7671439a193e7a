"""The shipped example data (configs/data/word_problems.jsonl) is what its script writes, and the
`word_problems` family reads it through the `file` task with its weighted reward."""

import importlib.util
import json
import re
from pathlib import Path

from calclip_jax.config import parse
from calclip_jax.data import get_task
from calclip_jax.data.rewards import RewardMix

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "configs" / "data" / "make_word_problems.py"


def _script():
    spec = importlib.util.spec_from_file_location("make_word_problems", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_file_is_the_scripts_output(tmp_path, monkeypatch):
    out = tmp_path / "w.jsonl"
    monkeypatch.setattr("sys.argv", ["make_word_problems.py", "--out", str(out)])
    _script().main()
    shipped = ROOT / "configs" / "data" / "word_problems.jsonl"
    assert out.read_bytes() == shipped.read_bytes()
    rows = [json.loads(line) for line in shipped.read_text().splitlines()]
    assert len(rows) == 300 == len({r["prompt"] for r in rows})
    for row in rows:  # integer answers that the problem's own numbers give
        a, b = (int(n) for n in re.findall(r"[0-9]+", row["prompt"]))
        assert int(row["answer"]) in (a + b, a - b, a * b) and int(row["answer"]) >= 0


def test_the_family_reads_the_file_with_its_reward(monkeypatch):
    monkeypatch.chdir(ROOT)  # the family's path is relative to the repo root
    from configs import word_problems

    run = parse(word_problems.get_config())
    task = get_task(run.task.name, **run.task.knobs)
    train, test = task.examples("train"), task.examples("test")
    assert len(train) + len(test) == 300 and len(test) > 10
    assert train[0].system.startswith("You solve word problems")
    mix = RewardMix.load(run.task.reward)
    ex = test[0]
    scores = mix.score([ex.prompt] * 2, [f"It is {ex.answer}.", "no idea"], [ex.answer] * 2, [1, 1])
    assert scores["reward"].tolist() == [1.0, 0.0]
    assert task.verify(ex, f"{ex.answer}").correct
