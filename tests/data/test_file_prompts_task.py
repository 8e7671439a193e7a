"""The `file` task: rows from a local JSONL (or parquet) file, field names by knobs, train/test by
file or by prompt hash, cached by content, bad files named by file:line:field before any
compile."""

import json
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shipped_model import shipped_gguf

from calclip_jax.config import ConfigError, base_config, build_run_spec
from calclip_jax.data import SPLITS, CharTokenizer, get_task, load_split
from calclip_jax.data.gguf_tokenizer import GGUFTokenizer
from calclip_jax.data.local_files import DataFileError
from calclip_jax.data.task import is_test_prompt


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def _rows(n, **extra):
    return [{"prompt": f"What is {i} + 1?", "answer": i + 1, **extra} for i in range(n)]


def test_rows_become_examples_split_by_prompt_hash(tmp_path):
    path = _write(tmp_path / "d.jsonl", _rows(200, system="Be brief."))
    task = get_task("file", path=path)
    train, test = task.examples("train"), task.examples("test")
    assert len(train) + len(test) == 200 and 0 < len(test) < 60
    assert all(is_test_prompt(ex.prompt, 0.1) for ex in test)
    assert not any(is_test_prompt(ex.prompt, 0.1) for ex in train)
    ex = train[0]
    assert (ex.prompt, ex.answer, ex.system) == ("What is 0 + 1?", "1", "Be brief.")
    assert task.verify(ex, "The answer is 1.").correct
    assert not task.verify(ex, "The answer is 2.").correct
    assert task.verify(ex, "one", finished=True).garbled
    assert task.verify(ex, "1", finished=False).garbled


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    prompts=st.lists(st.text(min_size=1, max_size=12).filter(str.strip), min_size=1, max_size=40),
    fraction=st.floats(0.05, 0.95),
)
def test_the_hash_split_is_deterministic_and_disjoint(prompts, fraction):
    test = [p for p in prompts if is_test_prompt(p, fraction)]
    assert test == [p for p in prompts if is_test_prompt(p, fraction)]  # deterministic
    train = {p for p in prompts if not is_test_prompt(p, fraction)}
    assert train.isdisjoint(test) and train | set(test) == set(prompts)
    # a larger test fraction only moves prompts from train to test
    assert set(test) <= {p for p in prompts if is_test_prompt(p, min(1.0, fraction + 0.04))}


def test_field_names_test_file_and_caps_are_knobs(tmp_path):
    rows = [{"q": f"Q{i}", "a": str(i), "sys": f"S{i}"} for i in range(8)]
    train = _write(tmp_path / "train.jsonl", rows)
    test = _write(tmp_path / "test.jsonl", rows[:3])
    task = get_task(
        "file", path=train, test_path=test, prompt_field="q", answer_field="a",
        system_field="sys", num_train=5, verifier="exact",
    )  # fmt: skip
    assert [ex.prompt for ex in task.examples("train")] == [f"Q{i}" for i in range(5)]
    assert [ex.system for ex in task.examples("test")] == ["S0", "S1", "S2"]
    assert task.verify(task.examples("test")[2], " 2 ").correct


def test_config_name_follows_the_file_bytes_not_its_name(tmp_path):
    path = tmp_path / "d.jsonl"
    _write(path, _rows(50))
    first = get_task("file", path=str(path)).config_name()
    assert get_task("file", path=str(path)).config_name() == first
    _write(path, _rows(51))
    changed = get_task("file", path=str(path))
    assert changed.config_name() != first
    assert len(changed.examples("train")) + len(changed.examples("test")) == 51


def test_tfds_round_trip_keeps_the_system_message(tmp_path):
    path = _write(tmp_path / "d.jsonl", _rows(120, system="Answer with a number."))
    task = get_task("file", path=path)
    for split in SPLITS:
        assert list(load_split(task, split, tmp_path / "tfds")) == task.examples(split)
    assert load_split(task, "test", tmp_path / "tfds")[0].system == "Answer with a number."


def test_the_system_message_precedes_the_prompt_without_a_chat_template(tmp_path):
    path = _write(tmp_path / "d.jsonl", _rows(60, system="Be brief."))
    task = get_task("file", path=path)
    tokenizer = CharTokenizer.for_tasks(task)
    ex = task.examples("train")[0]
    text = tokenizer.format_prompt(ex.prompt, ex.system)
    assert text == "Be brief.\n\nWhat is 0 + 1?"
    assert tokenizer.decode(tokenizer.encode(text)) == text  # the alphabet covers it


BAD_FILES = [
    ('{"prompt": "a", "answer": "1"}\n{"prompt": "b"\n', 2, "invalid JSON"),
    ('{"prompt": "a", "answer": "1"}\n\n["x"]\n', 3, "must be a JSON object"),
    ('{"prompt": "a", "answer": "1"}\n{"prompt": "b"}\n', 2, "field 'answer' is missing"),
    ('{"prompt": "", "answer": "1"}\n', 1, "field 'prompt' is empty"),
    ('{"prompt": 5, "answer": "1"}\n', 1, "field 'prompt' must be a string"),
    ('{"prompt": "a", "answer": true}\n', 1, "field 'answer' must be a string"),
    ('{"prompt": "a", "answer": "1", "system": ["x"]}\n', 1, "field 'system' must be a string"),
    ('{"prompt": "a", "answer": "1"}\n{"prompt": "b", "answer": "two"}\n', 2, "field 'answer'"),
]


@pytest.mark.parametrize(("text", "line", "named"), BAD_FILES)
def test_a_bad_file_is_named_by_file_line_and_field(tmp_path, text, line, named):
    path = tmp_path / "bad.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataFileError) as info:
        get_task("file", path=str(path))
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: ") and named in message
    assert "\n" not in message


def test_a_bad_file_fails_the_config_in_one_line_before_anything_compiles(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "a", "answer": "1"}\n{"prompt": "b", "answer": null}\n')
    config = base_config()
    config.task.name = "file"
    config.task.knobs = {"path": str(path)}
    with pytest.raises(ConfigError) as info:
        build_run_spec(config)
    assert f"{path}:2: field 'answer' is missing" in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("knobs", "named"),
    [
        ({}, "`path`"),
        ({"path": "nowhere.jsonl"}, "nowhere.jsonl: no such file"),
        ({"path": "data.csv"}, "unknown file type"),
        ({"test_fraction": 1.0}, "test_fraction"),
        ({"verifier": "magic"}, "verifier"),
        ({"num_train": -1}, "num_train"),
        ({"tolerance": float("nan")}, "tolerance"),
    ],
)
def test_bad_knobs_are_named(tmp_path, knobs, named):
    (tmp_path / "data.csv").write_text("prompt,answer\n")
    path = _write(tmp_path / "d.jsonl", _rows(40))
    knobs = {"path": path, **knobs} if knobs else {}
    if "path" in knobs and not knobs["path"].startswith("/"):
        knobs["path"] = str(tmp_path / knobs["path"])
    with pytest.raises(ValueError, match=named.replace("`", "`?")):
        get_task("file", **knobs)


def test_a_split_left_empty_is_an_error(tmp_path):
    path = _write(tmp_path / "d.jsonl", _rows(1))  # one prompt: one split stays empty
    with pytest.raises(DataFileError, match=r"no (train|test) rows"):
        get_task("file", path=path)


def test_parquet_without_pyarrow_names_pyarrow(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    path = tmp_path / "d.parquet"
    path.write_bytes(b"PAR1")
    with pytest.raises(DataFileError, match=r"d\.parquet: reading parquet needs pyarrow"):
        get_task("file", path=str(path))


def test_parquet_rows_are_read_like_jsonl(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow not installed (optional)")
    import pyarrow as pa

    rows = _rows(80, system="S")
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "d.parquet")
    from_parquet = get_task("file", path=str(tmp_path / "d.parquet"))
    from_jsonl = get_task("file", path=_write(tmp_path / "d.jsonl", rows))
    for split in SPLITS:
        assert from_parquet.examples(split) == from_jsonl.examples(split)
    table = pa.Table.from_pylist([{"prompt": "a", "answer": "1"}, {"prompt": None, "answer": "2"}])
    pq.write_table(table, tmp_path / "bad.parquet")
    with pytest.raises(DataFileError, match=r"bad\.parquet:2: field 'prompt' is missing"):
        get_task("file", path=str(tmp_path / "bad.parquet"))


def test_a_chat_template_gets_the_system_turn_before_the_user_turn():
    path = shipped_gguf()
    tokenizer = GGUFTokenizer.from_gguf(path)
    plain = tokenizer.format_prompt("What is 2 + 2?")
    with_system = tokenizer.format_prompt("What is 2 + 2?", "Be brief.")
    assert with_system == tokenizer.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 2?"}]
    )
    assert "Be brief." in with_system and "Be brief." not in plain
    assert with_system.index("Be brief.") < with_system.index("What is 2 + 2?")
